"""The wire between a session and its clients: framed JSON (plus raw bytes
for copied arrays), the version both sides must share, where sockets live and
who may use them.

A frame is two big-endian 64-bit lengths (header, payload), the header as
UTF-8 JSON, then the payload bytes (empty except for a copied array).

Every read has limits checked before anything is allocated (the header's
and the payload's lengths) and a deadline (``timeout``: the longest wait for
the next bytes of a frame once it has begun, and for its first byte when
``first_timeout`` is given). docs/security.md says what each side checks.

Connecting (client.py, server.py):

- Unix socket: the client checks the server's uid (SO_PEERCRED) before it
  sends anything; the server checks the client's. Then ``hello``.
- TCP: the client sends ``hello`` with a fresh nonce and no token; the
  server answers with ``proof`` = HMAC-SHA256(token, "server" | client nonce
  | server nonce) and its own nonce, nothing else; the client checks the
  proof (a listener without the token cannot make one) and answers ``auth``
  with HMAC(token, "client" | server nonce | client nonce). The token itself
  never crosses the wire. Only then does the server tell its version and
  its facts.
- A second connection of the same client (``s.submit``, a Ctrl-C's cancel)
  proves itself with the client's secret, handed to it at its first hello.
"""
import hashlib
import hmac
import json
import os
import secrets
import select
import socket
import stat
import struct
import sys
import tempfile
import time

# Bumped whenever a request or reply changes meaning; a client and a session
# of different versions refuse each other at connect (after authenticating).
PROTOCOL_VERSION = 2
_LENGTHS = struct.Struct(">QQ")
# A header is a small JSON document; anything larger is a peer speaking
# another protocol (or garbage), refused before allocating for it.
MAX_HEADER_BYTES = 16 << 20
# Before a peer has authenticated: its hello (and auth) frames.
MAX_HELLO_BYTES = 4096
DEFAULT_MAX_TRANSFER_BYTES = 1 << 30
NONCE_HEX = 64


class ProtocolError(Exception):
    """The peer sent something that is not a frame of this protocol (or
    took too long to send it)."""


def _ready(sock, events, wait):
    """Waits up to ``wait`` seconds (None: no limit) for ``events`` on
    ``sock``; False when the time ran out. The wait is a poll of its own,
    never the socket's timeout: a server socket is read by its connection's
    thread while the command thread sends it a reply, and a timeout set by
    one of them would be the other's too (a reader would then take an idle
    client for a slow one and drop it)."""
    poller = select.poll()
    poller.register(sock, events)
    if wait is None:
        while not poller.poll():
            pass
        return True
    return bool(poller.poll(max(0, int(wait * 1000))))


def _send_all(sock, data, timeout):
    """Sends ``data``; each send may wait at most ``timeout`` seconds (a
    peer that stops reading is a dead peer), None: no limit."""
    view = memoryview(data)
    while view:
        if not _ready(sock, select.POLLOUT, timeout):
            raise ProtocolError(f"the peer read nothing for {timeout:g} s")
        try:
            k = sock.send(view[:1 << 20], socket.MSG_DONTWAIT)
        except (BlockingIOError, socket.timeout):
            continue
        view = view[k:]


def send(sock, header, payload=b"", timeout=None):
    data = json.dumps(header, separators=(",", ":")).encode()
    _send_all(sock, _LENGTHS.pack(len(data), len(payload)) + data, timeout)
    if payload:
        _send_all(sock, payload, timeout)


def _read_exactly(sock, n, deadline=None, timeout=None):
    """``n`` bytes; each wait at most ``timeout`` s, all by ``deadline``."""
    view = memoryview(bytearray(n))
    got = 0
    while got < n:
        left = [t for t in (timeout, None if deadline is None else deadline - time.monotonic()) if t is not None]
        wait = min(left) if left else None
        if wait is not None and wait <= 0 or not _ready(sock, select.POLLIN, wait):
            raise ProtocolError("the peer is too slow: a frame did not arrive in time")
        try:
            k = sock.recv_into(view[got:], n - got, socket.MSG_DONTWAIT)
        except (BlockingIOError, socket.timeout):
            continue
        if k == 0:
            raise ConnectionResetError("the peer closed the connection")
        got += k
    return view.obj


def receive(sock, max_payload=None, *, max_header=MAX_HEADER_BYTES, timeout=None, first_timeout=None,
            deadline=None):
    """(header dict, payload bytes). ConnectionResetError at end of stream,
    ProtocolError for anything that is not a frame within the limits (sizes
    checked before allocating) and the time allowed: ``first_timeout`` for
    the frame's first byte (None: wait), ``timeout`` for each later wait,
    ``deadline`` (monotonic) for the whole frame."""
    first = _read_exactly(sock, 1, deadline, first_timeout)
    rest = _read_exactly(sock, _LENGTHS.size - 1, deadline, timeout)
    head_len, payload_len = _LENGTHS.unpack(bytes(first) + bytes(rest))
    if head_len > max_header:
        raise ProtocolError(f"a frame header of {head_len} bytes, more than the {max_header} allowed "
                            "(not a Tessera session peer?)")
    if max_payload is not None and payload_len > max_payload:
        raise ProtocolError(f"a payload of {payload_len} bytes, more than the {max_payload} allowed")
    try:
        header = json.loads(bytes(_read_exactly(sock, head_len, deadline, timeout)).decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ProtocolError(f"a frame header that is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a frame header that is not a JSON object")
    payload = bytes(_read_exactly(sock, payload_len, deadline, timeout)) if payload_len else b""
    return header, payload


# -- authentication --------------------------------------------------------------
def new_nonce():
    return secrets.token_hex(NONCE_HEX // 2)


def is_nonce(value):
    return isinstance(value, str) and len(value) == NONCE_HEX and all(c in "0123456789abcdef" for c in value)


def proof(token, role, first, second):
    """HMAC-SHA256 under the session's token of ROLE|FIRST|SECOND, hex: what
    each side shows to prove it holds the token without sending it."""
    return hmac.new(token.encode(), f"tessera-session {role}|{first}|{second}".encode(), hashlib.sha256).hexdigest()


def proof_matches(expected, given):
    """Constant-time comparison of a proof against one received (any type:
    a non-string, non-ASCII or wrong-length value is simply wrong)."""
    if not isinstance(given, str) or len(given) != len(expected) or not given.isascii():
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


_FALLBACK_RUNTIME = None


def _private_or_none(path):
    try:
        return private_dir(path)
    except (PermissionError, FileExistsError, NotADirectoryError):
        return None


def runtime_dir():
    """The directory sessions put their sockets in by default: one per user,
    mode 0700 (``$XDG_RUNTIME_DIR/tessera``, else ``TMPDIR/tessera-UID``).
    When that one is not ours and private (another user made it first), a
    fresh private directory is used instead, and said on stderr."""
    global _FALLBACK_RUNTIME
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return os.path.join(base, "tessera")
    usual = os.path.join(tempfile.gettempdir(), f"tessera-{os.getuid()}")
    if _private_or_none(usual):
        return usual
    if _FALLBACK_RUNTIME is None or not os.path.isdir(_FALLBACK_RUNTIME):
        _FALLBACK_RUNTIME = tempfile.mkdtemp(prefix=f"tessera-{os.getuid()}-")
        try:
            st = os.lstat(usual)
            who = f"uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}"
        except OSError:
            who = "unusable"
        print(f"tessera: {usual} is not a private directory of yours ({who}): someone else may have made it; "
              f"using {_FALLBACK_RUNTIME} instead (set XDG_RUNTIME_DIR to choose)", file=sys.stderr, flush=True)
    return _FALLBACK_RUNTIME


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


def peer_credentials(sock):
    """(pid, uid) of the process at the other end of a Unix socket
    (SO_PEERCRED, as the kernel recorded it at connect)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def peer_uid(sock):
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    return peer_credentials(sock)[1]


def tcp_peer_uid(conn):
    """The uid owning the other end of a TCP connection from this node
    (the kernel's table, /proc/net/tcp*), or None (another node)."""
    try:
        mine, theirs = conn.getsockname()[:2], conn.getpeername()[:2]
    except OSError:
        return None

    def key(addr):
        host, port = addr
        packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        if len(packed) == 4:
            text = "%08X" % struct.unpack("<I", packed)[0]
        else:
            text = "".join("%08X" % struct.unpack("<I", packed[i:i + 4])[0] for i in range(0, 16, 4))
        return f"{text}:{port:04X}"
    # One search of the whole table, not a split per line: a flood of
    # connections makes the table long, and each accept looks once.
    wanted = f" {key(theirs)} {key(mine)} "
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                text = f.read()
            at = text.find(wanted)
            if at >= 0:
                return int(text[at:text.find("\n", at)].split()[6])
        except (OSError, IndexError, ValueError):
            continue
    return None


def open_log(path):
    """A session's log, opened for writing without following a symlink
    (O_NOFOLLOW), mode 0600, truncated: a file object."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise PermissionError(f"cannot open the session's log {path} ({e.strerror}): a symlink or another "
                              "user's file there is refused") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise PermissionError(f"the session's log {path} is not a regular file of yours")
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w")


def check_shm_dir(environment=None):
    """TESSERA_SHM_DIR (in ``environment``, default this process's) when
    set: an existing directory owned by this user that no one else may
    write (else another user could replace or pre-empt the session's
    segments). ConfigError-worthy text raised as PermissionError; the
    directory, or None when unset (/dev/shm: the library's own files there
    are made O_EXCL, mode 0600)."""
    env = os.environ if environment is None else environment
    path = env.get("TESSERA_SHM_DIR")
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError as e:
        raise PermissionError(f"TESSERA_SHM_DIR={path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionError(f"TESSERA_SHM_DIR={path} is not a directory")
    if st.st_uid != os.getuid():
        raise PermissionError(f"TESSERA_SHM_DIR={path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}): "
                              "another user could replace the session's segments; use a directory of your own")
    if st.st_mode & 0o022:
        raise PermissionError(f"TESSERA_SHM_DIR={path} is mode {stat.S_IMODE(st.st_mode):o}: others may write in "
                              f"it; chmod go-w {path} or use a private directory")
    return path


def new_token():
    """256 bits from the OS's random source, as hex."""
    return secrets.token_hex(32)


def write_private(path, text):
    """Writes ``text`` to a new file of mode 0600 (never readable by others,
    not even for an instant)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
