"""The wire between a session and its clients: framed JSON (plus raw bytes
for copied arrays), the version both sides must share, where sockets live and
who may use them.

A frame is two big-endian 64-bit lengths (header, payload), the header as
UTF-8 JSON, then the payload bytes (empty except for a copied array).
"""
import json
import os
import secrets
import socket
import stat
import struct

# Bumped whenever a request or reply changes meaning; a client and a session
# of different versions refuse each other at connect.
PROTOCOL_VERSION = 1
_LENGTHS = struct.Struct(">QQ")
# A header is a small JSON document; anything larger is a peer speaking
# another protocol (or garbage), refused before allocating for it.
MAX_HEADER_BYTES = 16 << 20
DEFAULT_MAX_TRANSFER_BYTES = 1 << 30


class ProtocolError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def send(sock, header, payload=b""):
    data = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(_LENGTHS.pack(len(data), len(payload)) + data)
    if payload:
        sock.sendall(payload)


def _read_exactly(sock, n):
    view = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionResetError("the peer closed the connection")
        got += k
    return view.obj


def receive(sock, max_payload=None):
    """(header dict, payload bytes). ConnectionResetError at end of stream."""
    head_len, payload_len = _LENGTHS.unpack(_read_exactly(sock, _LENGTHS.size))
    if head_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"a frame header of {head_len} bytes (not a Tessera session peer?)")
    if max_payload is not None and payload_len > max_payload:
        raise ProtocolError(f"a payload of {payload_len} bytes, more than the {max_payload} allowed")
    try:
        header = json.loads(_read_exactly(sock, head_len).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"a frame header that is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a frame header that is not a JSON object")
    payload = bytes(_read_exactly(sock, payload_len)) if payload_len else b""
    return header, payload


def runtime_dir():
    """The directory sessions put their sockets in by default: one per user,
    mode 0700 (``$XDG_RUNTIME_DIR/tessera``, else ``/tmp/tessera-UID``)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return os.path.join(base, "tessera")
    return f"/tmp/tessera-{os.getuid()}"


def new_socket_path():
    """A fresh socket path for a session in this user's private runtime
    directory (made mode 0700 if need be)."""
    return os.path.join(private_dir(runtime_dir()), f"session-{os.getpid()}-{secrets.token_hex(4)}.sock")


def private_dir(path):
    """Creates ``path`` mode 0700 or checks an existing one is ours and
    private: a socket directory others can enter would let them connect."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionError(f"{path} is not a directory; sockets need a private directory")
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
                              "choose another --socket directory")
    if st.st_mode & 0o077:
        raise PermissionError(f"{path} is mode {stat.S_IMODE(st.st_mode):o}: others may enter it; "
                              f"make it private (chmod 700 {path}) or choose another --socket directory")
    return path


def peer_uid(sock):
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def new_token():
    """256 bits from the OS's random source, as hex."""
    return secrets.token_hex(32)


def write_private(path, text):
    """Writes ``text`` to a new file of mode 0600 (never readable by others,
    not even for an instant)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
