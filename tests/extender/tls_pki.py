"""Throwaway certificate authorities and certificates for the TLS tests,
made with the openssl command (elliptic-curve keys, valid one day)."""
import os
import subprocess


def run(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-days", "1", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
        "-out", f"{name}.crt", cwd=d)


def make_cert(d, name, ca, eku, san=None):
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    ext = f"extendedKeyUsage={eku}\n" + (f"subjectAltName={san}\n" if san else "")
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext)
    run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
