"""The device ledger's id of a container, as the interposer and the node
agent compute it from the container's region (gs_ledger_container_id,
src/core/ledger.c)."""
import os

_M = (1 << 64) - 1


def ledger_id(path):
    """The id of the container whose region is path."""
    st = os.stat(path)
    x = st.st_ino ^ ((st.st_dev * 0x9E3779B97F4A7C15) & _M)
    x ^= x >> 31
    x = (x * 0xBF58476D1CE4E5B9) & _M
    x ^= x >> 29
    return x or 1
