"""A reader of protobuf's text format (prototxt) into plain Python values,
without protobuf or the schema: enough for draw_net and the solver classes.

parse(text) gives a dict {field: [values]} (every field a list, in file
order); a message value is such a dict, a string a str, a number an int or
float, an enum name or true/false a str (`Enum` subclass of str). Errors
are ParseError with the line.
"""
import re

__all__ = ["parse", "ParseError"]


class ParseError(ValueError):
    pass


class Enum(str):
    """An unquoted identifier value (an enum name, true, false)."""


_TOKEN = re.compile(r'''\s*(?:(\#[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|([{}\[\]:;,<>])|([^\s{}\[\]:;,<>"'#]+))''')
_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f",
        "v": "\v", "0": "\0"}


def _unquote(s):
    out, i, body = [], 0, s[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESC.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _tokens(text):
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                return
            raise ParseError("line %d: cannot read %r" % (line, text[pos:pos + 20]))
        line += text.count("\n", pos, m.start(m.lastindex))
        pos = m.end()
        if m.group(1) is not None:
            continue
        if m.group(2) is not None:
            yield line, "str", _unquote(m.group(2))
        elif m.group(3) is not None:
            yield line, m.group(3), m.group(3)
        else:
            yield line, "word", m.group(4)


def _scalar(kind, v):
    if kind == "str":
        return v
    try:
        return int(v, 0) if re.fullmatch(r"[-+]?(0x[0-9a-fA-F]+|\d+)", v) else float(v)
    except ValueError:
        return Enum(v)


def parse(text):
    toks = list(_tokens(text))
    i = [0]

    def peek():
        return toks[i[0]] if i[0] < len(toks) else (toks[-1][0] if toks else 0, "eof", None)

    def take():
        t = peek()
        i[0] += 1
        return t

    def message(close):
        msg = {}
        while True:
            line, kind, v = peek()
            if kind == "eof":
                if close is not None:
                    raise ParseError("line %d: missing '%s'" % (line, close))
                return msg
            if kind == close:
                take()
                return msg
            if kind != "word":
                raise ParseError("line %d: expected a field name, got %r" % (line, v))
            take()
            name = v
            line, kind, v = peek()
            if kind == ":":
                take()
                line, kind, v = peek()
            if kind in ("{", "<"):
                take()
                value = message("}" if kind == "{" else ">")
                msg.setdefault(name, []).append(value)
            elif kind == "[":
                take()
                while True:
                    line, kind, v = take()
                    if kind == "]":
                        break
                    if kind == ",":
                        continue
                    msg.setdefault(name, []).append(_scalar(kind, v))
            elif kind in ("str", "word"):
                take()
                value = _scalar(kind, v)
                while kind == "str" and peek()[1] == "str":  # adjacent strings concatenate
                    value += take()[2]
                msg.setdefault(name, []).append(value)
            else:
                raise ParseError("line %d: field '%s' has no value" % (line, name))
            if peek()[1] in (";", ","):
                take()

    return message(None)
