"""NVML through ctypes for the compute benchmarks (bench.py's monitor,
diag.py's phases): GPU 0's SM clock, power, utilisation and throttle
reasons, its static clocks and power limit, and the raw per-process
utilisation samples the limiter's outer loop reads. Raises when NVML is
not there."""
import ctypes


class Sample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class DevSample(ctypes.Structure):
    # nvmlSample_t: a CPU timestamp in µs and an 8-byte union, read as its
    # unsigned int member (utilisation, power and clock samples)
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("value", ctypes.c_uint), ("pad", ctypes.c_uint)]


class Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class Nvml:
    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0
        self.h = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.h)) == 0
        self.seen = 0

    def clock_power(self):
        c, p = ctypes.c_uint(), ctypes.c_uint()
        self.lib.nvmlDeviceGetClockInfo(self.h, 1, ctypes.byref(c))  # NVML_CLOCK_SM
        self.lib.nvmlDeviceGetPowerUsage(self.h, ctypes.byref(p))
        u = Util()
        self.lib.nvmlDeviceGetUtilizationRates(self.h, ctypes.byref(u))
        r = ctypes.c_ulonglong()
        self.lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.h, ctypes.byref(r))
        return c.value, p.value / 1000.0, u.gpu, r.value

    def static(self):
        out = {}
        for name, fn, arg in (("max_sm_mhz", "nvmlDeviceGetMaxClockInfo", 1),
                              ("app_sm_mhz", "nvmlDeviceGetApplicationsClock", 1)):
            v = ctypes.c_uint()
            rc = getattr(self.lib, fn)(self.h, arg, ctypes.byref(v))
            out[name] = v.value if rc == 0 else f"rc{rc}"
        v = ctypes.c_uint()
        out["power_limit_w"] = v.value / 1000 if self.lib.nvmlDeviceGetEnforcedPowerLimit(
            self.h, ctypes.byref(v)) == 0 else None
        return out

    def proc_util(self):
        """Samples since the last call, or {"rc": NVML error}. Sizes the
        buffer first: a short one gets INSUFFICIENT_SIZE (7) and no samples."""
        f = self.lib.nvmlDeviceGetProcessUtilization
        n = ctypes.c_uint(0)
        rc = f(self.h, None, ctypes.byref(n), ctypes.c_ulonglong(self.seen))
        if rc not in (0, 7):
            return {"rc": rc}
        n = ctypes.c_uint(n.value + 32)
        buf = (Sample * n.value)()
        rc = f(self.h, buf, ctypes.byref(n), ctypes.c_ulonglong(self.seen))
        if rc != 0:
            return {"rc": rc}
        out = [(buf[i].pid, buf[i].smUtil, buf[i].timeStamp) for i in range(n.value)]
        if out:
            self.seen = max(t for _, _, t in out)
        return out

    def device_samples(self, kind=1, since=0):
        """nvmlDeviceGetSamples of one kind (1: GPU utilisation) newer than
        since (a CPU timestamp in µs): [(ts_us, value)], or {"rc": error}."""
        f = self.lib.nvmlDeviceGetSamples
        vt, n = ctypes.c_int(), ctypes.c_uint(0)
        rc = f(self.h, kind, ctypes.c_ulonglong(since), ctypes.byref(vt), ctypes.byref(n), None)
        if rc not in (0, 7):
            return {"rc": rc}
        if n.value == 0:
            return []
        buf = (DevSample * n.value)()
        rc = f(self.h, kind, ctypes.c_ulonglong(since), ctypes.byref(vt), ctypes.byref(n), buf)
        if rc == 6:  # NVML_ERROR_NOT_FOUND: nothing newer
            return []
        if rc != 0:
            return {"rc": rc}
        return [(buf[i].timeStamp, buf[i].value) for i in range(n.value)]
