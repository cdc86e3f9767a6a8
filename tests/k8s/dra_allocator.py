"""A small test allocator for ResourceClaims, in place of kube-scheduler's
DRA plugin (none can be had here). It follows the scheduler's rules for
consumable capacity (KEP-5075) as far as gpuslice's devices use them:

- a request (spec.devices.requests[].exactly, count 1) of a DeviceClass
  whose selector names the driver goes to a device of that driver's
  ResourceSlices;
- a device with allowMultipleAllocations may be shared: each allocation
  consumes, per capacity of the device, the amount its request asks
  (capacity.requests), or the requestPolicy's default when it asks none, or
  the whole capacity when the device has no requestPolicy; an amount is
  rounded up into the validRange (min + k * step) and refused above its max
  or outside validValues;
- a device fits when, for every capacity, what the claims allocated on it
  so far plus this claim's amount is at most its value;
- the result names request, driver, pool, device, consumedCapacity and a
  shareID, as status.allocation.devices.results[] does.
- the opaque configurations of the request's class and of the claim go to
  status.allocation.devices.config, marked FromClass and FromClaim.

Devices are tried in the slices' order (first fit). It is NOT the
scheduler: no CEL selectors, no node affinity beyond the slice's node, no
firstAvailable, no prioritised lists.
"""
import re
import uuid

_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def qty(s):
    """A whole Kubernetes quantity as an int (bytes, counts)."""
    m = re.fullmatch(r"([0-9]+)(|k|M|G|T|Ki|Mi|Gi|Ti)", str(s))
    if not m:
        raise ValueError(f"quantity {s!r} is not a whole number this allocator reads")
    return int(m.group(1)) * _SUFFIX[m.group(2)]


def fmt(n):
    """n as the API server's canonical binary quantity when it is whole."""
    for suf in ("Ti", "Gi", "Mi", "Ki"):
        if n and n % _SUFFIX[suf] == 0:
            return f"{n // _SUFFIX[suf]}{suf}"
    return str(n)


class Unschedulable(Exception):
    pass


def _amount(cap, asked):
    """What a request consumes of one capacity (KEP-5075's rules)."""
    value = qty(cap["value"])
    pol = cap.get("requestPolicy")
    if pol is None:
        return value if asked is None else asked
    want = qty(pol["default"]) if asked is None else asked
    if "validValues" in pol:
        vals = sorted(qty(v) for v in pol["validValues"])
        fit = [v for v in vals if v >= want]
        if not fit:
            raise Unschedulable(f"{want} is above every valid value {vals}")
        return fit[0]
    rng = pol.get("validRange", {})
    lo, step = qty(rng.get("min", "0")), qty(rng.get("step", "1"))
    if want < lo:
        want = lo
    if step > 0 and (want - lo) % step:
        want = lo + ((want - lo) // step + 1) * step
    if "max" in rng and want > qty(rng["max"]):
        raise Unschedulable(f"{want} is above the valid range's max {rng['max']}")
    return want


def _used(claims, driver, pool, device):
    used = {}
    for c in claims:
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results", []):
            if (r["driver"], r["pool"], r["device"]) == (driver, pool, device):
                for k, v in (r.get("consumedCapacity") or {}).items():
                    used[k] = used.get(k, 0) + qty(v)
    return used


def allocate(claim, slices, classes, allocated, node=None):
    """claim with status.allocation set (a new dict), or Unschedulable.
    slices: ResourceSlice objects; classes: DeviceClass objects by name;
    allocated: the claims already allocated (their results count)."""
    results = []
    taken = list(allocated)
    for req in claim["spec"]["devices"]["requests"]:
        ex = req["exactly"]
        if ex.get("count", 1) != 1 or ex.get("allocationMode", "ExactCount") != "ExactCount":
            raise Unschedulable("only one device per request here")
        cls = classes[ex["deviceClassName"]]
        drivers = {m.group(1) for s in cls["spec"].get("selectors", [])
                   for m in [re.search(r"device\.driver == \"([^\"]+)\"", s["cel"]["expression"])] if m}
        asked = {k: qty(v) for k, v in ((ex.get("capacity") or {}).get("requests") or {}).items()}
        why = "no device of the class"
        for s in slices:
            spec = s["spec"]
            if spec["driver"] not in drivers or (node and spec.get("nodeName") != node):
                continue
            for dev in spec["devices"]:
                used = _used(taken + [{"status": {"allocation": {"devices": {"results": results}}}}],
                             spec["driver"], spec["pool"]["name"], dev["name"])
                if not dev.get("allowMultipleAllocations") and used:
                    continue
                caps = dev.get("capacity", {})
                unknown = set(asked) - set(caps)
                if unknown:
                    why = f"device {dev['name']} has no capacity {sorted(unknown)}"
                    continue
                try:
                    take = {k: _amount(c, asked.get(k)) for k, c in caps.items()}
                except Unschedulable as e:
                    why = str(e)
                    continue
                if any(used.get(k, 0) + v > qty(caps[k]["value"]) for k, v in take.items()):
                    why = f"device {dev['name']} has too little left"
                    continue
                results.append({"request": req["name"], "driver": spec["driver"],
                                "pool": spec["pool"]["name"], "device": dev["name"],
                                "shareID": str(uuid.uuid4()),
                                "consumedCapacity": {k: fmt(v) for k, v in take.items()}})
                break
            else:
                continue
            break
        else:
            raise Unschedulable(f"request {req['name']}: {why}")
    out = dict(claim)
    node_name = next(s["spec"]["nodeName"] for s in slices if s["spec"]["pool"]["name"] == results[0]["pool"])
    # The configurations the driver gets: its classes' first, then the claim's.
    config = [dict(c, source="FromClass") for name in {r["exactly"]["deviceClassName"]
                                                        for r in claim["spec"]["devices"]["requests"]}
              for c in classes[name]["spec"].get("config", [])]
    config += [dict(c, source="FromClaim") for c in claim["spec"]["devices"].get("config", [])]
    out["status"] = {"allocation": {
        "devices": dict({"results": results}, **({"config": config} if config else {})),
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}}
    return out


def claim_from_template(template, name, namespace="default"):
    """The ResourceClaim the resourceclaim controller makes from a
    ResourceClaimTemplate for a pod (no status yet)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": template["spec"]["spec"]}
