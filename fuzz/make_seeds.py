#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ (fuzz/README.md): a few small valid and edge-case
inputs per target. The frame_dispatch seeds are framed txmq.v1.Frame streams, encoded here by
hand (field numbers from protocol/proto/txmq/v1/*.proto) so that no protobuf module is needed.
Run from anywhere: python3 fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_varint(field, n):
    return varint(field << 3) + varint(n)


def f_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def frame(corr, body_field, body):
    f = (f_varint(1, corr) if corr else b"") + f_bytes(body_field, body)
    return struct.pack(">I", len(f)) + f


def hello(group=""):
    return frame(1, 3, f_varint(1, 1) + f_bytes(2, "fuzz") + (f_bytes(3, group) if group else b""))


def message(mid, body, key=None, headers=None, topic=None):
    m = f_bytes(1, mid)
    if topic:
        m += f_bytes(2, topic)
    if key is not None:
        m += f_bytes(3, key)
    for k, v in (headers or {}).items():
        m += f_bytes(4, f_bytes(1, k) + f_bytes(2, v))
    return m + f_bytes(5, body)


def uid(n):
    return bytes([0x01, 0x9A, 0x00, 0x00, 0x00, 0x00, 0x70, 0x00, 0x80] + [0] * 6 + [n])


def ref(topic, partition, offset, attempt=1):
    return f_bytes(1, topic) + f_varint(2, partition) + f_varint(3, offset) + f_varint(4, attempt)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# (a) frame_dispatch
create = frame(2, 30, f_bytes(1, "t") + f_varint(2, 2))
produce = frame(3, 10, f_bytes(1, "t") + f_bytes(2, message(uid(1), "hello", key="k", headers={"h": "v"})) +
                f_bytes(2, message(uid(2), "world")))
group = frame(4, 35, f_bytes(1, "g") + f_bytes(2, "t"))
fetch = frame(5, 12, f_bytes(1, "g") + f_bytes(2, "t") + f_varint(3, 10))
ack = frame(6, 14, f_bytes(1, "g") + f_bytes(2, ref("t", 0, 0)) + f_bytes(2, ref("t", 1, 0)))
nack = frame(7, 15, f_bytes(1, "g") + f_bytes(2, ref("t", 0, 0)) + f_varint(3, 10))
describe = frame(8, 39, f_bytes(1, "g"))
dlq = frame(9, 40, f_bytes(1, "g") + f_varint(2, 10))
write("frame_dispatch", "produce_fetch_ack", hello() + create + produce + group + fetch + ack + describe)
write("frame_dispatch", "fetch_nack_dlq", hello() + produce + fetch + nack + fetch + dlq +
      frame(10, 42, f_bytes(1, "g")))
txid = bytes(range(1, 17))
prepare = frame(11, 50, f_bytes(1, txid) + f_bytes(2, "pg") + f_bytes(3, message(uid(3), "tx", topic="t")) +
                f_varint(4, 60000))
commit = frame(12, 52, f_bytes(1, txid) + f_varint(2, 1))
write("frame_dispatch", "prepare_commit_show", hello("pg") + prepare + frame(13, 56, b"") +
      frame(14, 58, f_bytes(1, txid)) + commit + frame(15, 58, f_bytes(1, txid)))
write("frame_dispatch", "prepare_rollback_resolve", hello("pg") + prepare +
      frame(16, 60, f_bytes(1, txid) + f_varint(2, 2)) + frame(17, 52, f_bytes(1, txid) + f_varint(2, 2)))
webhook = frame(18, 70, f_bytes(1, f_bytes(2, "t") + f_bytes(3, "https://example.com/hook?a=1")) + f_varint(2, 1))
write("frame_dispatch", "webhook_create_list", hello() + create + webhook + frame(19, 72, b"") + produce)
write("frame_dispatch", "admin_listings", hello() + create + frame(20, 32, b"") + frame(21, 34, f_bytes(1, "t")) +
      frame(22, 37, b"") + frame(23, 34, f_bytes(1, "missing")))
write("frame_dispatch", "no_hello", create)
write("frame_dispatch", "zero_correlation", hello() + frame(0, 32, b""))
write("frame_dispatch", "truncated", hello() + create[:-3])
write("frame_dispatch", "bad_headers", hello() + frame(24, 10, f_bytes(1, "t") + f_bytes(
    2, message(uid(4), "x", headers={"bad\nname": "v", "": "empty"}))))
write("frame_dispatch", "check_tx_answer", hello("pg") + frame(25, 55, f_bytes(1, txid) + f_varint(2, 1)))

# (b) config_toml
write("config_toml", "minimal", 'listen = "127.0.0.1:7878"\n')
write("config_toml", "full", """listen = "127.0.0.1:7878"
http = "127.0.0.1:7879"
data_dir = "./data"
tx_timeout = "6s"
tx_check_schedule = "5s,10s,30s"
max_attempts = 16
retry_schedule = "10s,30s,1m"
max_message_bytes = "4MiB"
max_frame_bytes = "8MiB"
hello_timeout = "10s"
idle_timeout = "0s"
retention = "7d"
retention_bytes = "1GiB"
durability = "sync"
webhook_schedule = "15s,15s"
log_level = "info"
""")
write("config_toml", "bad_types", 'max_attempts = "sixteen"\nretention = 7\n[table]\nx = 1\n')
write("config_toml", "too_big", 'max_frame_bytes = "2GiB"\ntx_timeout = "99999999999999d"\n')
write("config_toml", "unknown_key", 'no_such_setting = true\n')

# (c) webhook_parse: byte 0 even = URL, odd = Retry-After
for i, u in enumerate(["https://example.com/hook", "http://127.0.0.1:8080/a?b=c", "http://[::1]:9/x",
                       "http://h:/", "http://h:99999999999999999999/", "https://user:pw@h/p#frag",
                       "ftp://h/", "http:///nohost"]):
    write("webhook_parse", "url_%d" % i, b"\x00" + u.encode())
for i, r in enumerate(["120", "0", "Wed, 21 Oct 2015 07:28:00 GMT", "Thu, 26 Nov 2026 00:01:00 GMT",
                       "-5", "99999999999999999999", " 7 ", "Sun, 06 Nov 1994 08:49:37 XYZ"]):
    write("webhook_parse", "retry_after_%d" % i, b"\x01" + r.encode())


# (d) outbox_row: columns separated by 0xff
def row(*cols):
    return b"\xff".join(c.encode() if isinstance(c, str) else c for c in cols)


write("outbox_row", "plain", row("019a0000-0000-7000-8000-000000000001", "orders", "k1", '{"a":"b"}',
                                 "\\x68656c6c6f", "1795651200000", "1"))
write("outbox_row", "null_key_number_header", row("019a0000-0000-7000-8000-000000000002", "t", "",
                                                  '{"n": 1, "o": {"x": [1,2]}}', "\\x", "0", "42"))
write("outbox_row", "bad_id", row("not-a-uuid", "t", "k", "{}", "\\x00", "1", "1"))
write("outbox_row", "bad_hex", row("019a0000-0000-7000-8000-000000000003", "t", "k", "[]", "\\xzz", "-1", "x"))
write("outbox_row", "odd_hex", row("019a0000-0000-7000-8000-000000000004", "t", "k", "{}", "\\x123", "", ""))

# (e) address_units: byte 0 % 4 = host_port, duration, duration list, size
for i, t in enumerate(["127.0.0.1:7878", "[::1]:80", "localhost:0", "host:65536", "::1:80", " h:1 ", "[]:1"]):
    write("address_units", "host_port_%d" % i, b"\x00" + t.encode())
for i, t in enumerate(["500ms", "6s", "7d", "0s", "9223372036854775807ms", "106751992d", "1.5s"]):
    write("address_units", "duration_%d" % i, b"\x01" + t.encode())
for i, t in enumerate(["1s,2s,5s", " 1s , 2m ", "1s,,2s", ""]):
    write("address_units", "duration_list_%d" % i, b"\x02" + t.encode())
for i, t in enumerate(["4194304", "4MiB", "1GiB", "18446744073709551615", "17179869184GiB", "1KB"]):
    write("address_units", "size_%d" % i, b"\x03" + t.encode())
