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


# The device ledger file's layout (struct gs_ledger_file, ledger.h): a
# 40-byte header (magic, version, size: GS_LEDGER_MAGIC, GS_LEDGER_VERSION),
# then MEMBERS members of MEMBER_SIZE bytes (container at +0, active_ns +8,
# wants_ns +16, asked_ns +24, pid +32, open +36, weight +40, use +44, claim
# +48, draining +52, hold_ns +56, pidns +64).
HEADER, MEMBER_SIZE, MEMBERS = 40, 72, 128
LEDGER_MAGIC, LEDGER_VERSION = 0x5245474445475321, 8
LEDGER_SIZE = HEADER + MEMBER_SIZE * MEMBERS


def member_at(slot):
    """The byte offset of member slot `slot`."""
    return HEADER + MEMBER_SIZE * slot


def member_offsets(b):
    """The byte offsets of the members in ledger bytes b."""
    return range(HEADER, len(b) - MEMBER_SIZE + 1, MEMBER_SIZE)
