#!/usr/bin/env python3
# Regenerate key_vectors.json (run from the repository root): python3 opkey/testdata/gen_key_vectors.py
"""Independent reference for Courier keys and fingerprints (docs/keys.md).

Nothing here calls the Go code: the key comes from uuid.uuid5 (checked against
a by-hand RFC 9562 computation) and the canonical JSON from the small parser
below, written from the spec. The script then runs the Python snippet from
docs/keys.md over every vector, so the spec's own example is checked too.
"""

import hashlib
import json
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "key_vectors.json")
DOC = os.path.join(HERE, "..", "..", "docs", "keys.md")

NAMESPACE = uuid.UUID("bd868725-8c48-4f30-877f-3de82f48d062")
MAX_FIELD_BYTES = 255
MAX_PAYLOAD_BYTES = 256 * 1024
MAX_DEPTH = 10000
FIELDS = ("tenant", "destination", "operation", "business_id")


# ---------------------------------------------------------------- key


def key_name(op):
    name = b"courier-key-v1"
    for f in FIELDS:
        b = op[f].encode("utf-8")
        name += str(len(b)).encode("ascii") + b":" + b + b";"
    return name


def key(op):
    name = key_name(op)
    via_lib = str(uuid.uuid5(NAMESPACE, name.decode("utf-8")))
    # RFC 9562 section 5.5 by hand: SHA-1 of namespace || name, first 16
    # bytes, version 5 in the high nibble of byte 6, variant 0b10 in byte 8.
    h = bytearray(hashlib.sha1(NAMESPACE.bytes + name).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50
    h[8] = (h[8] & 0x3F) | 0x80
    by_hand = str(uuid.UUID(bytes=bytes(h)))
    assert via_lib == by_hand, (via_lib, by_hand)
    return via_lib


def validate(op):
    for f in FIELDS:
        v = op[f]
        if f != "tenant" and v == "":
            return f
        if len(v.encode("utf-8", "surrogatepass")) > MAX_FIELD_BYTES:
            return f
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return f
    # Characters last, once every field passes the checks above.
    for f in FIELDS:
        if any(refused(c) for c in op[f]):
            return f
    return None


def refused(c):
    """C0 controls, DEL, C1 controls, bidirectional formatting characters."""
    o = ord(c)
    return (o < 0x20 or 0x7F <= o <= 0x9F or o in (0x061C, 0x200E, 0x200F)
            or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069)


# ---------------------------------------------------------------- canonical JSON


class Reject(Exception):
    pass


WS = b" \t\n\r"
ESCAPES = {b'"': '"', b"\\": "\\", b"/": "/", b"b": "\b", b"f": "\f", b"n": "\n", b"r": "\r", b"t": "\t"}
HEX = b"0123456789abcdefABCDEF"


class Parser:
    def __init__(self, data):
        self.d = data
        self.i = 0
        self.depth = 0

    def peek(self):
        return self.d[self.i : self.i + 1]

    def ws(self):
        while self.peek() and self.peek() in WS:
            self.i += 1

    def expect(self, b):
        if self.peek() != b:
            raise Reject("expected %r at %d" % (b, self.i))
        self.i += 1

    def value(self):
        c = self.peek()
        if c == b"{":
            return self.obj()
        if c == b"[":
            return self.arr()
        if c == b'"':
            return ("str", self.string())
        if c and c in b"-0123456789":
            return ("num", self.number())
        for lit in (b"true", b"false", b"null"):
            if self.d.startswith(lit, self.i):
                self.i += len(lit)
                return ("lit", lit.decode())
        raise Reject("no value at %d" % self.i)

    def nest(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Reject("too deep")

    def seq(self, open_, close, item):
        """Reads open_, items separated by commas, close: an object or array."""
        self.nest()
        self.expect(open_)
        items = []
        self.ws()
        if self.peek() == close:
            self.i += 1
        else:
            while True:
                self.ws()
                items.append(item())
                self.ws()
                if self.peek() == b",":
                    self.i += 1
                    continue
                self.expect(close)
                break
        self.depth -= 1
        return items

    def member(self):
        if self.peek() != b'"':
            raise Reject("member name expected at %d" % self.i)
        name = self.string()
        self.ws()
        self.expect(b":")
        self.ws()
        return (name, self.value())

    def obj(self):
        members = self.seq(b"{", b"}", self.member)
        names = [n for n, _ in members]
        if len(set(names)) != len(names):
            raise Reject("duplicate member name")
        return ("obj", members)

    def arr(self):
        return ("arr", self.seq(b"[", b"]", self.value))

    def digits(self):
        start = self.i
        while self.peek() and self.peek() in b"0123456789":
            self.i += 1
        return self.i - start

    def number(self):
        start = self.i
        if self.peek() == b"-":
            self.i += 1
        if self.peek() == b"0":
            self.i += 1
        elif self.peek() and self.peek() in b"123456789":
            self.digits()
        else:
            raise Reject("bad number at %d" % self.i)
        if self.peek() == b".":
            self.i += 1
            if not self.digits():
                raise Reject("bad fraction at %d" % self.i)
        if self.peek() and self.peek() in b"eE":
            self.i += 1
            if self.peek() and self.peek() in b"+-":
                self.i += 1
            if not self.digits():
                raise Reject("bad exponent at %d" % self.i)
        return self.d[start : self.i].decode("ascii")

    def hex4(self):
        h = self.d[self.i : self.i + 4]
        if len(h) != 4 or any(c not in HEX for c in h):
            raise Reject("bad \\u escape at %d" % self.i)
        self.i += 4
        return int(h, 16)

    def string(self):
        """Returns the decoded string as a list of code points."""
        self.expect(b'"')
        out = []
        while True:
            c = self.peek()
            if not c:
                raise Reject("unterminated string")
            if c == b'"':
                self.i += 1
                return "".join(out)
            if c[0] < 0x20:
                raise Reject("control character in string at %d" % self.i)
            if c == b"\\":
                e = self.d[self.i + 1 : self.i + 2]
                self.i += 2
                if e in ESCAPES:
                    out.append(ESCAPES[e])
                elif e == b"u":
                    u = self.hex4()
                    if 0xD800 <= u <= 0xDBFF and self.d.startswith(b"\\u", self.i):
                        self.i += 2
                        lo = self.hex4()
                        if not 0xDC00 <= lo <= 0xDFFF:
                            raise Reject("lone surrogate")
                        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                    elif 0xD800 <= u <= 0xDFFF:
                        raise Reject("lone surrogate")
                    out.append(chr(u))
                else:
                    raise Reject("bad escape at %d" % self.i)
                continue
            # Literal run up to the next quote, backslash or control byte;
            # Python's strict UTF-8 decoder rejects what Go's utf8.Valid does.
            j = self.i
            while j < len(self.d) and self.d[j] not in b'"\\' and self.d[j] >= 0x20:
                j += 1
            try:
                out.append(self.d[self.i : j].decode("utf-8"))
            except UnicodeDecodeError:
                raise Reject("invalid UTF-8")
            self.i = j


def enc_string(s):
    out = ['"']
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def utf16_units(s):
    units = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    return units


def encode(v):
    kind, x = v
    if kind == "obj":
        members = sorted(x, key=lambda m: utf16_units(m[0]))
        return "{" + ",".join(enc_string(n) + ":" + encode(m) for n, m in members) + "}"
    if kind == "arr":
        return "[" + ",".join(encode(m) for m in x) + "]"
    if kind == "str":
        return enc_string(x)
    return x  # number text as written, or a literal


def canonical(payload):
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise Reject("too large")
    p = Parser(payload)
    p.ws()
    if p.peek() != b"{":
        raise Reject("not an object")
    v = p.obj()
    p.ws()
    if p.i != len(payload):
        raise Reject("trailing data")
    return encode(v).encode("utf-8")


def fingerprint(payload):
    return hashlib.sha256(canonical(payload)).hexdigest()


# ---------------------------------------------------------------- vectors


def op(tenant, destination, operation, business_id):
    return dict(tenant=tenant, destination=destination, operation=operation, business_id=business_id)


ACME = op("acme", "helpdesk", "create-ticket", "example-001")

TICKET_1K = """{
  "subject": "Printer on floor 3 jams on every duplex job",
  "description": "Since the firmware update on Monday the HP LaserJet in room 3.14 jams whenever a job is printed double-sided. Single-sided jobs are fine. Ticket opened by the service desk on behalf of the requester.",
  "priority": "high",
  "type": "incident",
  "requester": {"name": "Zo\u00eb M\u00fcller", "email": "zoe.mueller@example.com", "phone": "+41 44 555 01 23", "locale": "de-CH"},
  "assignee_group": "it-hardware",
  "tags": ["printer", "floor-3", "duplex", "firmware"],
  "custom_fields": [
    {"id": 360001234567, "value": "LJ-M607-0042"},
    {"id": 360001234568, "value": 3},
    {"id": 360001234569, "value": true},
    {"id": 360001234570, "value": null}
  ],
  "due_at": "2025-03-14T17:00:00Z",
  "estimate_hours": 1.5,
  "metadata": {"source": "courier", "correlation_id": "7d7f1f5e-0a44-4c1e-9a53-3b9f3c1c2d10", "attempt_policy": {"max": 5, "backoff": 2.0}},
  "watchers": [{"email": "facilities@example.com"}, {"email": "it-lead@example.com"}]
}
"""

# (name, operation, payload text, relations). Payloads are raw JSON text:
# member order, spacing and escapes are exactly as a caller might send them.
VECTORS = [
    ("design-example", ACME, '{"subject": "Printer jams", "priority": "high"}', {}),
    ("design-example-compact", ACME, '{"priority":"high","subject":"Printer jams"}',
     {"same_fingerprint_as": "design-example"}),
    ("unicode-fields-and-payload", op("caf\u00e9", "\u5de5\u5355\u7cfb\u7edf", "cr\u00e9er-ticket", "order-\U0001F600-001"),
     '{"subject": "Caf\u00e9 cr\u00e8me \u2014 \u5de5\u5355 \U0001F600", "\u540d\u524d": "\u5c71\u7530", "emoji_\U0001F600": true}', {}),
    ("empty-tenant", op("", "helpdesk", "create-ticket", "example-001"), "{}", {}),
    ("separator-colon-in-tenant", op("a:b", "c", "create-ticket", "example-001"), "{}", {}),
    ("separator-colon-in-destination", op("a", "b:c", "create-ticket", "example-001"), "{}",
     {"different_key_from": "separator-colon-in-tenant"}),
    ("separator-semicolon-in-tenant", op("a;b", "c", "create-ticket", "example-001"), "{}", {}),
    ("separator-semicolon-in-destination", op("a", "b;c", "create-ticket", "example-001"), "{}",
     {"different_key_from": "separator-semicolon-in-tenant"}),
    ("length-prefix-lookalike-fields", op("4:acme;", "8:helpdesk;", "13:create-ticket;", "11:example-001;"), "{}",
     {"different_key_from": "design-example"}),
    ("length-prefix-lookalike-shifted", op("", "acme;8:helpdesk", "create-ticket;11", "example-001"), "{}",
     {"different_key_from": "length-prefix-lookalike-fields"}),
    ("two-digit-length-and-max-field", op("tenant-12345", "helpdesk", "create-ticket", "\u20ac" * 85), '{"n":1}', {}),
    ("nested-objects-and-arrays", ACME,
     '{"b":{"z":[{"y":1,"x":[true,false,null]},[],{}],"a":{}},"a":[[[]],[{"k":"v"}]]}', {}),
    ("member-order-permutation-1", ACME, '{"c":3,"a":{"y":[1,{"q":1,"p":2}],"x":null},"b":"two"}', {}),
    ("member-order-permutation-2", ACME, '{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":"two","c":3}',
     {"same_fingerprint_as": "member-order-permutation-1"}),
    ("member-order-permutation-3", ACME, '{"b":"two","c":3,"a":{"y":[1,{"p":2,"q":1}],"x":null}}',
     {"same_fingerprint_as": "member-order-permutation-1"}),
    ("white-space-compact", ACME, '{"b":[1,2],"a":{"c":"x y"}}', {}),
    ("white-space-pretty", ACME, '\r\n{\r\n\t"b" : [ 1 ,\n 2 ] ,\n  "a":{ "c"\t:\t"x y" }\t}\n  ',
     {"same_fingerprint_as": "white-space-compact"}),
    ("number-integer", ACME, '{"n":1}', {}),
    ("number-decimal-kept", ACME, '{"n":1.0}', {"different_fingerprint_from": "number-integer"}),
    ("numbers-as-written", ACME,
     '{"int":1,"float":1.0,"exp":1e2,"EXP":1E+2,"negexp":2e-0,"neg_zero":-0,"frac":0.10,'
     '"big":12345678901234567890123456789,"small":-1.5e-7,"zero":0}', {}),
    ("escape-u00e9", ACME, '{"name":"\\u00e9"}', {}),
    ("escape-literal-e-acute", ACME, '{"name":"\u00e9"}', {"same_fingerprint_as": "escape-u00e9"}),
    ("escapes-decoded", ACME,
     '{"slash":"a\\/b","A":"\\u0041","quote":"\\"","backslash":"\\\\","upper_hex":"\\u00E9\\u00C9","pair":"\\ud83d\\ude00",'
     '"\\u006eame":"n"}', {}),
    ("surrogate-pair-escape", ACME, '{"e":"\\ud83d\\ude00"}', {}),
    ("surrogate-pair-literal", ACME, '{"e":"\U0001F600"}', {"same_fingerprint_as": "surrogate-pair-escape"}),
    ("control-characters", ACME,
     '{"c":"\\u0000\\u0001\\u0008\\u0009\\u000a\\u000b\\u000c\\u000d\\u001f\\u0020\\u007f\\b\\f\\n\\r\\t",'
     '"raw_del":"\x7f","line_sep":"\\u2028\\u2029","bom":"\\ufeff","replacement":"\\ufffd"}', {}),
    ("utf16-order-differs-from-code-point-order", ACME,
     '{"\uff61":1,"\U0001F600":2,"a":3,"\u00e9":4,"":5,"\ue000":6,"\U00010000":7,"A":8,"~":9}', {}),
    ("member-name-prefix-ties", ACME,
     '{"abcdefghi":1,"abcdefgh":2,"abcdefgh\\u0000":3,"a\\u0000":4,"a":5,"a\\"b":6,"a\\nb":7,'
     '"description_long_b":8,"description_long_a":9,"\\"quoted\\"":10}', {}),
    ("empty-object", ACME, "{}", {}),
    ("realistic-ticket-1kib", ACME, TICKET_1K, {}),
]

# Payloads every implementation must reject: (name, payload bytes, reason).
INVALID_PAYLOADS = [
    ("empty", b"", "not an object"),
    ("white-space-only", b" \n", "not an object"),
    ("array", b"[1,2]", "not an object"),
    ("string", b'"x"', "not an object"),
    ("number", b"1", "not an object"),
    ("null", b"null", "not an object"),
    ("byte-order-mark", b"\xef\xbb\xbf{}", "not an object"),
    ("non-json-space-form-feed", b"\x0c{}", "not an object"),
    ("non-json-space-nbsp", b"\xc2\xa0{}", "not an object"),
    ("unterminated-object", b'{"a":1', "invalid JSON"),
    ("missing-value", b'{"a":}', "invalid JSON"),
    ("trailing-comma", b'{"a":1,}', "invalid JSON"),
    ("missing-colon", b'{"a" 1}', "invalid JSON"),
    ("single-quotes", b"{'a':1}", "invalid JSON"),
    ("unquoted-name", b"{a:1}", "invalid JSON"),
    ("leading-zero", b'{"a":01}', "invalid JSON"),
    ("minus-leading-zero", b'{"a":-01}', "invalid JSON"),
    ("leading-plus", b'{"a":+1}', "invalid JSON"),
    ("leading-dot", b'{"a":.5}', "invalid JSON"),
    ("trailing-dot", b'{"a":1.}', "invalid JSON"),
    ("empty-exponent", b'{"a":1e}', "invalid JSON"),
    ("lone-minus", b'{"a":-}', "invalid JSON"),
    ("nan", b'{"a":NaN}', "invalid JSON"),
    ("infinity", b'{"a":Infinity}', "invalid JSON"),
    ("hex-number", b'{"a":0x10}', "invalid JSON"),
    ("truncated-literal", b'{"a":tru}', "invalid JSON"),
    ("capitalised-literal", b'{"a":True}', "invalid JSON"),
    ("raw-newline-in-string", b'{"a":"x\ny"}', "invalid JSON"),
    ("raw-tab-in-string", b'{"a":"x\ty"}', "invalid JSON"),
    ("bad-escape", b'{"a":"\\x41"}', "invalid JSON"),
    ("short-unicode-escape", b'{"a":"\\u12"}', "invalid JSON"),
    ("non-hex-unicode-escape", b'{"a":"\\u12g4"}', "invalid JSON"),
    ("comment", b'{"a":1 /* c */}', "invalid JSON"),
    ("trailing-data", b'{"a":1} {"b":2}', "trailing data"),
    ("trailing-garbage", b'{"a":1}x', "trailing data"),
    ("trailing-nul", b'{"a":1}\x00', "trailing data"),
    ("duplicate-name", b'{"a":1,"a":2}', "duplicate member name"),
    ("duplicate-name-nested", b'{"x":{"b":1,"c":2,"b":3}}', "duplicate member name"),
    ("duplicate-name-via-escape", b'{"\xc3\xa9":1,"\\u00e9":2}', "duplicate member name"),
    ("lone-high-surrogate", b'{"a":"\\ud800"}', "lone surrogate"),
    ("lone-low-surrogate", b'{"a":"\\udc00"}', "lone surrogate"),
    ("high-surrogate-then-other-escape", b'{"a":"\\ud800\\u0041"}', "lone surrogate"),
    ("high-surrogate-twice", b'{"a":"\\ud83d\\ud83d\\ude00"}', "lone surrogate"),
    ("reversed-surrogate-pair", b'{"a":"\\ude00\\ud83d"}', "lone surrogate"),
    ("lone-surrogate-in-name", b'{"\\udfff":1}', "lone surrogate"),
    ("invalid-utf8-byte", b'{"a":"\xff"}', "invalid UTF-8"),
    ("invalid-utf8-truncated", b'{"a":"\xc3"}', "invalid UTF-8"),
    ("invalid-utf8-overlong", b'{"a":"\xc0\xaf"}', "invalid UTF-8"),
    ("invalid-utf8-encoded-surrogate", b'{"a":"\xed\xa0\x80"}', "invalid UTF-8"),
    ("invalid-utf8-above-max", b'{"a":"\xf4\x90\x80\x80"}', "invalid UTF-8"),
    ("invalid-utf8-in-name", b'{"\xfe":1}', "invalid UTF-8"),
]

INVALID_OPERATIONS = [
    ("empty-destination", op("acme", "", "create-ticket", "example-001"), "destination"),
    ("empty-operation", op("acme", "helpdesk", "", "example-001"), "operation"),
    ("empty-business-id", op("acme", "helpdesk", "create-ticket", ""), "business_id"),
    ("tenant-256-bytes", op("t" * 256, "helpdesk", "create-ticket", "example-001"), "tenant"),
    ("business-id-256-bytes", op("acme", "helpdesk", "create-ticket", "\u20ac" * 85 + "x"), "business_id"),
    ("business-id-nul", op("acme", "helpdesk", "create-ticket", "example\x00001"), "business_id"),
    ("tenant-cr-lf", op("acme\r\n", "helpdesk", "create-ticket", "example-001"), "tenant"),
    ("operation-tab", op("acme", "helpdesk", "create\tticket", "example-001"), "operation"),
    ("destination-del", op("acme", "help\x7fdesk", "create-ticket", "example-001"), "destination"),
    ("business-id-c1-next-line", op("acme", "helpdesk", "create-ticket", "example\x85001"), "business_id"),
    ("business-id-right-to-left-override", op("acme", "helpdesk", "create-ticket", "example-\u202e100"), "business_id"),
    ("tenant-left-to-right-mark", op("\u200eacme", "helpdesk", "create-ticket", "example-001"), "tenant"),
    ("operation-arabic-letter-mark", op("acme", "helpdesk", "create-ticket\u061c", "example-001"), "operation"),
    ("business-id-first-strong-isolate", op("acme", "helpdesk", "create-ticket", "example-\u2068001\u2069"), "business_id"),
    # Characters are checked after every field's other rules: the empty
    # business id is reported, not the tenant's line feed.
    ("characters-after-other-rules", op("acme\n", "helpdesk", "create-ticket", ""), "business_id"),
]


def build():
    vectors, by_name = [], {}
    for name, o, text, rel in VECTORS:
        assert validate(o) is None, name
        payload = text.encode("utf-8")
        canon = canonical(payload)
        v = {
            "name": name,
            "operation": o,
            "key_name_hex": key_name(o).hex(),
            "payload": text,
            "key": key(o),
            "canonical_payload": canon.decode("utf-8"),
            "fingerprint": hashlib.sha256(canon).hexdigest(),
        }
        v.update(rel)
        vectors.append(v)
        by_name[name] = v
    for v in vectors:
        if "same_fingerprint_as" in v:
            assert v["fingerprint"] == by_name[v["same_fingerprint_as"]]["fingerprint"], v["name"]
        if "different_fingerprint_from" in v:
            assert v["fingerprint"] != by_name[v["different_fingerprint_from"]]["fingerprint"], v["name"]
        if "different_key_from" in v:
            assert v["key"] != by_name[v["different_key_from"]]["key"], v["name"]
    keys = [v["key"] for v in vectors]
    assert len(set(key_name(v["operation"]) for v in vectors)) == len(set(keys))

    invalid = []
    for name, payload, reason in INVALID_PAYLOADS:
        try:
            canonical(payload)
        except Reject:
            pass
        else:
            raise AssertionError("accepted invalid payload " + name)
        e = {"name": name, "reason": reason}
        try:
            e["payload"] = payload.decode("utf-8")
        except UnicodeDecodeError:
            e["payload_hex"] = payload.hex()
        invalid.append(e)

    bad_ops = []
    for name, o, field in INVALID_OPERATIONS:
        assert validate(o) == field, name
        bad_ops.append({"name": name, "operation": o, "field": field})

    return {
        "comment": "Courier key and fingerprint test vectors; see docs/keys.md. "
        "Generated by gen_key_vectors.py in this directory: do not edit by hand.",
        "namespace": str(NAMESPACE),
        "vectors": vectors,
        "invalid_payloads": invalid,
        "invalid_operations": bad_ops,
    }


def check_doc_snippet(doc):
    """Runs the Python block marked <!-- reference-python --> in docs/keys.md."""
    if not os.path.exists(DOC):
        print("docs/keys.md not found, snippet not checked", file=sys.stderr)
        return
    text = open(DOC, encoding="utf-8").read()
    start = text.index("```python\n", text.index("<!-- reference-python -->")) + len("```python\n")
    code = text[start : text.index("```", start)]
    ns = {"__name__": "keys_md"}
    exec(compile(code, "docs/keys.md", "exec"), ns)
    ns["check"](OUT)
    print("docs/keys.md Python snippet reproduces every vector")


def main():
    doc = build()
    with open(OUT, "w", encoding="utf-8") as f:
        text = json.dumps(doc, ensure_ascii=False, indent=2)
        # Escaped, so no invisible character changes how the file reads.
        f.write("".join("\\u%04x" % ord(c) if refused(c) and c != "\n" else c for c in text) + "\n")
    print("wrote %d vectors, %d invalid payloads, %d invalid operations to %s"
          % (len(doc["vectors"]), len(doc["invalid_payloads"]), len(doc["invalid_operations"]), OUT))
    check_doc_snippet(doc)


if __name__ == "__main__":
    main()
