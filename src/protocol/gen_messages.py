#!/usr/bin/env python3
"""Generates the C++ message structs of Sluice's Kafka codec from our schema.

Why a generator and not templates/macros: every field of every message has a
version range, an optional nullable range and possibly a tag; writing that as
C++ templates would bury the facts in metaprogramming and compile slowly on
our two cores. A ~500-line generator keeps the schema files plain and short
(one line per field), and its output is ordinary C++ that can be read and
stepped through in a debugger. The build runs it (see CMakeLists.txt); the
output lives only in the build directory.

Schema grammar (files src/protocol/schema/*.schema):

    file      := { decl }
    decl      := "message" NAME KIND "key="INT "versions="RANGE ["flexible="FROM]
                 | "data" NAME "versions="RANGE ["flexible="FROM]
                 | "struct" NAME          (a struct type shared by the next
                                           messages of the same file)
                 followed by indented field lines
    KIND      := "request" | "response"
    field     := NAME TYPE RANGE { OPTION }
                 [indented field lines: the members of TYPE's struct]
    TYPE      := "bool" | "int8" | "int16" | "int32" | "int64" | "uint16"
                 | "uint32" | "float64" | "uuid" | "string" | "bytes"
                 | "records" | STRUCT | "[]" TYPE
    RANGE     := INT | INT"+" | INT"-"INT | "none"
    OPTION    := "null="RANGE      versions in which the value may be null
               | "tag="INT         a tagged field (in the versions of RANGE)
               | "default="VALUE   value when absent; decides if a tag is sent
               | "flexible=none"   always classic encoding (header client id)
    FROM      := INT"+" | "none"

Comments start with '#'. "versions=" of a message is the range Sluice
supports, which may be narrower than the range where a field exists.
"""
import re
import sys

PRIMS = {
    'bool': ('bool', 'false', 1, 'bool'),
    'int8': ('int8_t', '0', 1, 'int8'),
    'int16': ('int16_t', '0', 2, 'int16'),
    'int32': ('int32_t', '0', 4, 'int32'),
    'int64': ('int64_t', '0', 8, 'int64'),
    'uint16': ('uint16_t', '0', 2, 'uint16'),
    'uint32': ('uint32_t', '0', 4, 'uint32'),
    'float64': ('double', '0', 8, 'float64'),
    'uuid': ('uuid', '{}', 16, 'uuid'),
}
VMAX = 0x7FFF


class SchemaError(Exception):
    pass


def parse_range(s, where):
    if s == 'none':
        return None
    m = re.fullmatch(r'(\d+)\+', s)
    if m:
        return (int(m.group(1)), VMAX)
    m = re.fullmatch(r'(\d+)-(\d+)', s)
    if m:
        return (int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r'(\d+)', s)
    if m:
        return (int(m.group(1)), int(m.group(1)))
    raise SchemaError(f'{where}: bad version range {s!r}')


class Field:
    def __init__(self, name, typ, versions, opts, where):
        self.name = name
        self.type = typ
        self.versions = versions
        self.nullable = parse_range(opts.pop('null'), where) if 'null' in opts else None
        self.tag = int(opts.pop('tag')) if 'tag' in opts else None
        self.default = opts.pop('default', None)
        self.never_flexible = opts.pop('flexible', None) == 'none'
        if opts:
            raise SchemaError(f'{where}: unknown options {sorted(opts)}')
        self.children = []
        self.where = where

    @property
    def is_array(self):
        return self.type.startswith('[]')

    @property
    def elem(self):
        return self.type[2:] if self.is_array else self.type


class Struct:
    def __init__(self, name, fields):
        self.name = name
        self.fields = fields


class Message:
    def __init__(self, kind, name, key, versions, flexible, where):
        self.kind = kind  # request, response, data
        self.name = name
        self.key = key
        self.versions = versions
        self.flexible = flexible  # first flexible version or None
        self.fields = []
        self.shared = {}
        self.where = where


def tokenize_line(line):
    line = line.split('#', 1)[0].rstrip()
    if not line.strip():
        return None, None
    indent = len(line) - len(line.lstrip(' '))
    return indent, line.split()


def parse_file(path):
    decls = []
    shared = {}
    stack = []  # (indent, list-to-append-to)
    cur = None
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            where = f'{path}:{n}'
            indent, toks = tokenize_line(raw)
            if toks is None:
                continue
            if indent == 0:
                kw = toks[0]
                opts = dict(t.split('=', 1) for t in toks[2:] if '=' in t)
                if kw == 'message':
                    kind = toks[2]
                    if kind not in ('request', 'response'):
                        raise SchemaError(f'{where}: kind must be request or response')
                    opts = dict(t.split('=', 1) for t in toks[3:])
                    cur = Message(kind, toks[1], int(opts['key']),
                                  parse_range(opts['versions'], where),
                                  flex_from(opts.get('flexible', 'none'), where), where)
                    cur.shared = shared
                    decls.append(cur)
                    stack = [(0, cur.fields)]
                elif kw == 'data':
                    cur = Message('data', toks[1], None, parse_range(opts['versions'], where),
                                  flex_from(opts.get('flexible', 'none'), where), where)
                    cur.shared = shared
                    decls.append(cur)
                    stack = [(0, cur.fields)]
                elif kw == 'struct':
                    s = Struct(toks[1], [])
                    shared[toks[1]] = s
                    cur = s
                    stack = [(0, s.fields)]
                else:
                    raise SchemaError(f'{where}: unknown declaration {kw!r}')
                continue
            if cur is None:
                raise SchemaError(f'{where}: field outside a declaration')
            while stack and indent <= stack[-1][0] and len(stack) > 1:
                stack.pop()
            if len(toks) < 3:
                raise SchemaError(f'{where}: a field needs NAME TYPE RANGE')
            opts = {}
            for t in toks[3:]:
                if '=' not in t:
                    raise SchemaError(f'{where}: bad option {t!r}')
                k, v = t.split('=', 1)
                opts[k] = v
            fld = Field(toks[0], toks[1], parse_range(toks[2], where), opts, where)
            stack[-1][1].append(fld)
            stack.append((indent, fld.children))
    return decls


def flex_from(s, where):
    if s == 'none':
        return None
    m = re.fullmatch(r'(\d+)\+', s)
    if not m:
        raise SchemaError(f'{where}: flexible must be N+ or none')
    return int(m.group(1))


def cond(rng, var='version'):
    """C++ condition for `version` within rng (None means never)."""
    if rng is None:
        return 'false'
    lo, hi = rng
    parts = []
    if lo > 0:
        parts.append(f'{var} >= {lo}')
    if hi < VMAX:
        parts.append(f'{var} <= {hi}')
    return ' && '.join(parts) if parts else 'true'


class Gen:
    def __init__(self, messages, base='messages', ns='sluice::protocol', tables=True):
        self.messages = messages
        self.base = base
        self.ns = ns
        self.tables = tables
        self.h = []
        self.cc = []
        self.fill = []

    # ---- type resolution -------------------------------------------------
    def struct_of(self, msg, fld):
        """Struct members for a struct-typed field (inline or shared)."""
        if fld.children:
            return fld.children
        if fld.elem in msg.shared:
            return msg.shared[fld.elem].fields
        raise SchemaError(f'{fld.where}: unknown type {fld.elem!r}')

    def is_struct(self, fld):
        return fld.elem not in PRIMS and fld.elem not in ('string', 'bytes', 'records')

    def cpp_elem(self, fld):
        e = fld.elem
        if e in PRIMS:
            return PRIMS[e][0]
        if e == 'string':
            return 'std::string'
        if e == 'bytes':
            return 'std::vector<uint8_t>'
        if e == 'records':
            return 'records_field'
        return e

    def cpp_type(self, fld):
        t = self.cpp_elem(fld)
        if fld.is_array:
            t = f'std::vector<{t}>'
        if fld.nullable and fld.elem != 'records':
            if fld.elem in PRIMS and not fld.is_array:
                raise SchemaError(f'{fld.where}: a scalar cannot be nullable')
            t = f'std::optional<{t}>'
        return t

    def cpp_default(self, fld):
        d = fld.default
        if fld.is_array or fld.elem == 'records' or self.is_struct(fld):
            if d not in (None, 'null', '[]'):
                raise SchemaError(f'{fld.where}: unsupported default for {fld.type}')
            return ''
        if fld.nullable:
            if d in (None, 'null'):
                return ''
            if d == '""':
                return ' = std::string()'
            raise SchemaError(f'{fld.where}: unsupported default {d!r}')
        if fld.elem == 'string' or fld.elem == 'bytes':
            if d not in (None, '""'):
                raise SchemaError(f'{fld.where}: unsupported default {d!r}')
            return ''
        if d is None:
            return ' = uuid{}' if fld.elem == 'uuid' else ' = ' + PRIMS[fld.elem][1]
        if fld.elem == 'bool':
            if d not in ('true', 'false'):
                raise SchemaError(f'{fld.where}: bad bool default')
            return ' = ' + d
        if fld.elem == 'float64':
            return ' = ' + d
        int(d, 0)
        return f' = {d}' if not d.startswith('-') else f' = {PRIMS[fld.elem][0]}({d})'

    # ---- declarations ----------------------------------------------------
    def declare_struct(self, msg, name, fields, ind, top):
        p = ' ' * ind
        out = []
        out.append(f'{p}struct {name} {{')
        if top:
            m = msg
            if m.kind != 'data':
                out.append(f'{p}  static constexpr int16_t api_key = {m.key};')
            out.append(f'{p}  static constexpr int16_t min_version = {m.versions[0]};')
            out.append(f'{p}  static constexpr int16_t max_version = {m.versions[1]};')
            out.append(f'{p}  // First flexible version (KIP-482); {VMAX} if none.')
            out.append(f'{p}  static constexpr int16_t flexible_from = {m.flexible if m.flexible is not None else VMAX};')
            out.append(f'{p}  static constexpr std::string_view message_name = "{m.name}";')
            for f in fields:
                if f.name in ('api_key', 'min_version', 'max_version', 'flexible_from', 'message_name'):
                    raise SchemaError(f'{f.where}: field name {f.name!r} collides with a constant')
        declared = set()
        for f in fields:
            if self.is_struct(f) and f.children and f.elem not in declared:
                declared.add(f.elem)
                out.extend(self.declare_struct(msg, f.elem, f.children, ind + 2, False))
        for f in fields:
            out.append(f'{p}  {self.cpp_type(f)} {f.name}{self.cpp_default(f)};')
        out.append(f'{p}  bool operator==(const {name}&) const = default;')
        out.append(f'{p}  void write(writer& w, int16_t version) const;')
        out.append(f'{p}  void read(reader& r, int16_t version);')
        if top:
            out.append(f'{p}  // Encodes the body (no header) in `version`, which must be in range.')
            out.append(f'{p}  void encode(writer& w, int16_t version) const {{ write(w, version); }}')
            out.append(f'{p}  // Decodes the body; errors are values (errc::malformed). Byte views')
            out.append(f'{p}  // (records) point into the reader\'s buffer, which must outlive *this.')
            out.append(f'{p}  status decode(reader& r, int16_t version) {{')
            out.append(f'{p}    read(r, version);')
            out.append(f'{p}    return r.to_status();')
            out.append(f'{p}  }}')
        out.append(f'{p}}};')
        return out

    # ---- code for one value ---------------------------------------------
    def flex_expr(self, fld):
        return 'false' if fld.never_flexible else 'flex'

    def write_value(self, msg, fld, expr, ind, elem=False):
        """Lines writing `expr`, a value of fld's (element) type."""
        p = ' ' * ind
        fx = self.flex_expr(fld)
        e = fld.elem
        if e in PRIMS:
            return [f'{p}w.write_{PRIMS[e][3]}({expr});']
        if e == 'string':
            return [f'{p}w.write_string({expr}, {fx});']
        if e == 'bytes':
            return [f'{p}w.write_bytes({expr}, {fx});']
        if e == 'records':
            return [f'{p}w.write_records({expr}, {fx});']
        return [f'{p}{expr}.write(w, version);']

    def read_value(self, msg, fld, target, ind):
        p = ' ' * ind
        fx = self.flex_expr(fld)
        e = fld.elem
        if e in PRIMS:
            return [f'{p}{target} = r.read_{PRIMS[e][3]}();']
        if e == 'string':
            return [f'{p}{target} = r.read_string({fx});']
        if e == 'bytes':
            return [f'{p}{target} = r.read_bytes({fx});']
        if e == 'records':
            return [f'{p}{target} = r.read_records({fx});']
        return [f'{p}{target}.read(r, version);']

    def min_bytes(self, fld):
        e = fld.elem
        if e in PRIMS:
            return str(PRIMS[e][2])
        if e == 'string':
            return '(flex ? 1u : 2u)'
        if e in ('bytes', 'records'):
            return '(flex ? 1u : 4u)'
        return '1u'

    def write_field(self, msg, fld, ind, src='this->'):
        p = ' ' * ind
        name = f'{src}{fld.name}'
        fx = self.flex_expr(fld)
        out = []
        nul = cond(fld.nullable)
        if fld.is_array:
            if fld.nullable:
                out.append(f'{p}if (!{name}.has_value() && ({nul})) {{')
                out.append(f'{p}  w.write_null_array({fx});')
                out.append(f'{p}}} else {{')
                out.append(f'{p}  static const {self.cpp_elem(fld) if False else "std::vector<" + self.cpp_elem(fld) + ">"} empty_;')
                out.append(f'{p}  const auto& a_ = {name}.has_value() ? *{name} : empty_;')
            else:
                out.append(f'{p}{{')
                out.append(f'{p}  const auto& a_ = {name};')
            out.append(f'{p}  w.write_array_length(a_.size(), {fx});')
            out.append(f'{p}  for (const auto& e_ : a_) {{')
            out.extend(self.write_value(msg, fld, 'e_', ind + 4))
            out.append(f'{p}  }}')
            out.append(f'{p}}}')
            return out
        if fld.elem == 'records':
            # records_field carries its own null flag.
            return self.write_value(msg, fld, name, ind)
        if fld.nullable:
            if fld.elem in ('string', 'bytes'):
                wr = 'write_nullable_string' if fld.elem == 'string' else 'write_nullable_bytes'
                out.append(f'{p}if ({nul}) {{')
                out.append(f'{p}  w.{wr}({name}, {fx});')
                out.append(f'{p}}} else {{')
                empty = 'std::string_view()' if fld.elem == 'string' else 'std::span<const uint8_t>()'
                conv = f'{name}.has_value() ? {conv_view(fld, name)} : {empty}'
                wr2 = 'write_string' if fld.elem == 'string' else 'write_bytes'
                out.append(f'{p}  w.{wr2}({conv}, {fx});')
                out.append(f'{p}}}')
                return out
            # nullable struct: int8 marker
            out.append(f'{p}if (!{name}.has_value()) {{')
            out.append(f'{p}  w.write_int8(-1);')
            out.append(f'{p}}} else {{')
            out.append(f'{p}  w.write_int8(1);')
            out.append(f'{p}  {name}->write(w, version);')
            out.append(f'{p}}}')
            return out
        return self.write_value(msg, fld, name, ind)

    def read_field(self, msg, fld, ind, dst='this->'):
        p = ' ' * ind
        name = f'{dst}{fld.name}'
        fx = self.flex_expr(fld)
        out = []
        nul = cond(fld.nullable)
        if fld.is_array:
            out.append(f'{p}{{')
            out.append(f'{p}  const int64_t n_ = r.read_array_length({fx}, {self.min_bytes(fld)});')
            out.append(f'{p}  if (n_ < 0) {{')
            if fld.nullable:
                out.append(f'{p}    if (n_ == -1 && !({nul})) r.fail("null array {fld.name} in a version where it is not nullable");')
                out.append(f'{p}    {name}.reset();')
            else:
                out.append(f'{p}    if (n_ == -1) r.fail("null array {fld.name} is not nullable");')
                out.append(f'{p}    {name}.clear();')
            out.append(f'{p}  }} else {{')
            tgt = f'{name}.emplace()' if fld.nullable else f'{name}'
            out.append(f'{p}  auto& a_ = {tgt};')
            out.append(f'{p}  a_.clear();')
            # The count is already bounded by the bytes left and the element
            # budget; reserving is further capped because a struct's minimum
            # wire size (1 byte assumed) can be far below its C++ size.
            out.append(f'{p}  a_.reserve(std::min<size_t>(static_cast<size_t>(n_), 1024));')
            out.append(f'{p}  for (int64_t i_ = 0; i_ < n_ && r.ok(); ++i_) {{')
            out.append(f'{p}    auto& e_ = a_.emplace_back();')
            out.extend(self.read_value(msg, fld, 'e_', ind + 4))
            out.append(f'{p}  }}')
            out.append(f'{p}  }}')
            out.append(f'{p}}}')
            return out
        if fld.elem == 'records':
            out.extend(self.read_value(msg, fld, name, ind))
            out.append(f'{p}if ({name}.is_null() && !({nul})) r.fail("null records in {fld.name}");')
            return out
        if fld.nullable:
            if fld.elem in ('string', 'bytes'):
                rd = 'read_nullable_string' if fld.elem == 'string' else 'read_nullable_bytes'
                out.append(f'{p}{name} = r.{rd}({fx});')
                out.append(f'{p}if (!{name}.has_value() && !({nul})) r.fail("null {fld.name} in a version where it is not nullable");')
                return out
            out.append(f'{p}{{')
            out.append(f'{p}  const int8_t m_ = r.read_int8();')
            out.append(f'{p}  if (m_ < 0) {{')
            out.append(f'{p}    if (!({nul})) r.fail("null struct {fld.name} in a version where it is not nullable");')
            out.append(f'{p}    {name}.reset();')
            out.append(f'{p}  }} else {{')
            # Assigned, not emplace()d: clang decides whether a nested
            # struct with default member initialisers is default-
            # constructible while the enclosing message is still incomplete,
            # and std::optional::emplace() then fails to compile.
            out.append(f'{p}    {name} = std::decay_t<decltype({name})>::value_type{{}};')
            out.append(f'{p}    {name}->read(r, version);')
            out.append(f'{p}  }}')
            out.append(f'{p}}}')
            return out
        return self.read_value(msg, fld, name, ind)

    def default_expr(self, fld, t=None):
        t = t or self.cpp_type(fld)
        d = self.cpp_default(fld)
        if d:
            return f'{t}({d[3:]})'
        return f'{t}{{}}'

    def define_struct(self, msg, qual, fields, top):
        flex = msg.flexible
        fcond = 'false' if flex is None else f'version >= {flex}'
        out = []
        # write
        out.append(f'void {qual}::write(writer& w, [[maybe_unused]] int16_t version) const {{')
        out.append(f'  [[maybe_unused]] const bool flex = {fcond};')
        tagged = sorted([f for f in fields if f.tag is not None], key=lambda f: f.tag)
        for f in fields:
            if f.tag is not None:
                continue
            out.append(f'  if ({cond(f.versions)}) {{')
            out.extend(self.write_field(msg, f, 4))
            out.append('  }')
        out.append('  if (flex) {')
        out.append('    uint32_t tags_ = 0;')
        for f in tagged:
            out.append(f'    const bool t{f.tag}_ = ({cond(f.versions)}) && !(this->{f.name} == {self.default_expr(f)});')
            out.append(f'    if (t{f.tag}_) ++tags_;')
        out.append('    w.write_uvarint(tags_);')
        for f in tagged:
            out.append(f'    if (t{f.tag}_) {{')
            out.append('      writer tw_;')
            out.append('      {')
            out.append('        writer& w = tw_;  // shadows: the value goes to the side buffer')
            out.extend(self.write_field(msg, f, 8))
            out.append('      }')
            out.append(f'      w.write_uvarint({f.tag});')
            out.append('      w.write_tagged_value(tw_);')
            out.append('    }')
        out.append('  }')
        out.append('}')
        out.append('')
        # read
        out.append(f'void {qual}::read(reader& r, [[maybe_unused]] int16_t version) {{')
        out.append(f'  [[maybe_unused]] const bool flex = {fcond};')
        for f in fields:
            if f.tag is not None:
                continue
            out.append(f'  if ({cond(f.versions)}) {{')
            out.extend(self.read_field(msg, f, 4))
            out.append('  }')
        out.append('  if (flex) {')
        out.append('    const uint32_t tags_ = r.read_uvarint();')
        out.append('    for (uint32_t i_ = 0; i_ < tags_ && r.ok(); ++i_) {')
        out.append('      const uint32_t tag_ = r.read_uvarint();')
        out.append('      reader tr_ = r.tagged_value();')
        out.append('      if (!r.ok()) break;')
        out.append('      switch (tag_) {')
        for f in tagged:
            out.append(f'        case {f.tag}:')
            out.append(f'          if ({cond(f.versions)}) {{')
            out.append('            reader& r_outer_ = r;')
            out.append('            {')
            out.append('              reader& r = tr_;')
            out.extend(self.read_field(msg, f, 14))
            out.append('            }')
            out.append('            r_outer_.adopt_failure(tr_);')
            out.append('          }')
            out.append('          break;')
        out.append('        default:')
        out.append('          break;  // unknown tags are skipped (KIP-482)')
        out.append('      }')
        out.append('    }')
        out.append('  }')
        out.append('}')
        out.append('')
        declared = set()
        for f in fields:
            if self.is_struct(f) and f.children and f.elem not in declared:
                declared.add(f.elem)
                out.extend(self.define_struct(msg, f'{qual}::{f.elem}', f.children, False))
        return out

    # ---- test filler ----------------------------------------------------
    def fill_struct(self, msg, qual, fields):
        out = []
        declared = set()
        for f in fields:
            if self.is_struct(f) and f.children and f.elem not in declared:
                declared.add(f.elem)
                out.extend(self.fill_struct(msg, f'{qual}::{f.elem}', f.children))
        out.append(f'inline void fill_random({qual}& s, fill_context& c, int16_t version) {{')
        out.append('  (void)c;')
        out.append('  (void)version;')
        for f in fields:
            out.append(f'  if ({cond(f.versions)}) {{')
            nul = cond(f.nullable)
            may_null = f'({nul}) && c.coin(8)'
            if f.is_array:
                out.append(f'    if ({may_null}) {{')
                if f.nullable:
                    out.append(f'      s.{f.name}.reset();')
                else:
                    out.append(f'      s.{f.name}.clear();')
                out.append('    } else {')
                tgt = f's.{f.name}.emplace()' if f.nullable else f's.{f.name}'
                out.append(f'      auto& a_ = {tgt};')
                out.append('      a_.resize(c.count());')
                out.append('      for (auto& e_ : a_) fill_value(e_, c, version);')
                out.append('    }')
            elif f.elem == 'records':
                out.append(f'    if ({may_null}) s.{f.name} = records_field(); else s.{f.name} = c.records();')
            elif f.nullable:
                # Assigned, not emplace()d (see the reader's nullable struct).
                out.append(f'    if ({may_null}) {{')
                out.append(f'      s.{f.name}.reset();')
                out.append('    } else {')
                out.append(f'      s.{f.name} = std::decay_t<decltype(s.{f.name})>::value_type{{}};')
                out.append(f'      fill_value(*s.{f.name}, c, version);')
                out.append('    }')
            else:
                out.append(f'    fill_value(s.{f.name}, c, version);')
            if f.tag is not None:
                dt = f'std::remove_cvref_t<decltype(s.{f.name})>'
                out.append(f'    if (c.coin(3)) s.{f.name} = {self.default_expr(f, dt)};')
            out.append('  }')
        out.append('}')
        out.append('')
        return out

    def run(self, out_dir):
        h = self.h
        h.append('// Generated by src/protocol/gen_messages.py from src/protocol/schema/. Do not edit.')
        h.append('#pragma once')
        h.append('')
        h.append('#include <cstdint>')
        h.append('#include <optional>')
        h.append('#include <string>')
        h.append('#include <string_view>')
        h.append('#include <variant>')
        h.append('#include <vector>')
        h.append('')
        h.append('#include "base/result.h"')
        h.append('#include "protocol/codec.h"')
        h.append('')
        h.append(f'namespace {self.ns} {{')
        h.append('')
        cc = self.cc
        cc.append('// Generated by src/protocol/gen_messages.py from src/protocol/schema/. Do not edit.')
        cc.append(f'#include "protocol/{self.base}.h"')
        cc.append('')
        cc.append('#include <algorithm>')
        cc.append('')
        cc.append(f'namespace {self.ns} {{')
        cc.append('')
        fl = self.fill
        fl.append('// Generated by src/protocol/gen_messages.py: random fillers for tests.')
        fl.append('#pragma once')
        fl.append(f'#include "protocol/{self.base}.h"')
        fl.append('#include "protocol/testing/fill_context.h"')
        fl.append('')
        fl.append(f'namespace {self.ns}::testing {{')
        if self.ns != 'sluice::protocol':
            fl.append('using namespace sluice::protocol::testing;')
        fl.append('')
        names = []
        for m in self.messages:
            for sname, s in m.shared.items():
                pass
            # Shared structs become nested types of each message that uses them.
            fields = m.fields
            self.inline_shared(m, fields)
            h.extend(self.declare_struct(m, m.name, fields, 0, True))
            h.append('')
            cc.extend(self.define_struct(m, m.name, fields, True))
            # Fillers need declarations of all overloads first.
            fl.extend(self.fill_decls(m, m.name, fields))
            names.append(m)
        for m in self.messages:
            fl.extend(self.fill_struct(m, m.name, m.fields))
            fl.append(f'// Resets the top-level tagged fields of {m.name} to their defaults.')
            fl.append(f'inline void reset_tagged_fields({m.name}& s) {{')
            fl.append('  (void)s;')
            for f in m.fields:
                if f.tag is not None:
                    dt = f'std::remove_cvref_t<decltype(s.{f.name})>'
                    fl.append(f'  s.{f.name} = {self.default_expr(f, dt)};')
            fl.append('}')
            fl.append('')
        if not self.tables:
            self.finish_without_tables(out_dir)
            return
        reqs = [m for m in self.messages if m.kind == 'request']
        resps = {m.key: m for m in self.messages if m.kind == 'response'}
        for m in reqs:
            if m.key not in resps:
                raise SchemaError(f'{m.where}: no response for key {m.key}')
            r = resps[m.key]
            if r.versions != m.versions or r.flexible != m.flexible:
                raise SchemaError(f'{r.where}: versions differ from the request')
        h.append('// One row per API Sluice decodes: the versions the codec implements and')
        h.append('// the first flexible version (which decides the header versions).')
        h.append('struct api_support {')
        h.append('  int16_t api_key;')
        h.append('  std::string_view name;')
        h.append('  int16_t min_version;')
        h.append('  int16_t max_version;')
        h.append('  int16_t flexible_from;')
        h.append('};')
        h.append(f'inline constexpr api_support supported_api_table[] = {{')
        for m in sorted(reqs, key=lambda m: m.key):
            h.append(f'    {{{m.key}, "{m.name[:-len("_request")]}", {m.versions[0]}, {m.versions[1]}, {m.flexible if m.flexible is not None else VMAX}}},')
        h.append('};')
        h.append('')
        h.append('using any_request = std::variant<')
        h.append(',\n'.join(f'    {m.name}' for m in sorted(reqs, key=lambda m: m.key)) + '>;')
        h.append('using any_response = std::variant<')
        h.append(',\n'.join(f'    {resps[m.key].name}' for m in sorted(reqs, key=lambda m: m.key)) + '>;')
        h.append('')
        h.append('// Calls f(type_tag<T>{}) for every message type (tests, fuzzing).')
        h.append('template <class T> struct type_tag { using type = T; };')
        h.append('template <class F> void for_each_message_type(F&& f) {')
        for m in self.messages:
            h.append(f'  f(type_tag<{m.name}>{{}});')
        h.append('}')
        h.append('')
        h.append('// The request body type for an API key, decoded in `version`.')
        h.append('// Fails with errc::unsupported_version for an unknown key or version.')
        h.append('result<any_request> decode_request_body(int16_t api_key, int16_t version, reader& r);')
        h.append('')
        h.append('}  // namespace sluice::protocol')
        cc.append('result<any_request> decode_request_body(int16_t api_key, int16_t version, reader& r) {')
        cc.append('  switch (api_key) {')
        for m in sorted(reqs, key=lambda m: m.key):
            cc.append(f'    case {m.key}: {{')
            cc.append(f'      if (version < {m.name}::min_version || version > {m.name}::max_version) break;')
            cc.append(f'      {m.name} body;')
            cc.append('      if (status s = body.decode(r, version); !s.ok()) return s.err();')
            cc.append('      return any_request(std::move(body));')
            cc.append('    }')
        cc.append('    default:')
        cc.append('      break;')
        cc.append('  }')
        cc.append('  return error{errc::unsupported_version, "api key " + std::to_string(api_key) + " version " + std::to_string(version) + " is not supported"};')
        cc.append('}')
        cc.append('')
        cc.append('}  // namespace sluice::protocol')
        fl.append('}  // namespace sluice::protocol::testing')
        self.write_files(out_dir)

    def finish_without_tables(self, out_dir):
        """Output for a schema outside the API table (the generator's own
        self-test schema): types, for_each_message_type, nothing else."""
        for m in self.messages:
            if m.kind != 'data':
                raise SchemaError(f'{m.where}: only data declarations are allowed here')
        h = self.h
        h.append('template <class T> struct type_tag { using type = T; };')
        h.append('template <class F> void for_each_message_type(F&& f) {')
        for m in self.messages:
            h.append(f'  f(type_tag<{m.name}>{{}});')
        h.append('}')
        h.append('')
        h.append(f'}}  // namespace {self.ns}')
        self.cc.append(f'}}  // namespace {self.ns}')
        self.fill.append(f'}}  // namespace {self.ns}::testing')
        self.write_files(out_dir)

    def write_files(self, out_dir):
        write_if_changed(f'{out_dir}/{self.base}.h', '\n'.join(self.h) + '\n')
        write_if_changed(f'{out_dir}/{self.base}.cc', '\n'.join(self.cc) + '\n')
        write_if_changed(f'{out_dir}/{self.base}_fill.h', '\n'.join(self.fill) + '\n')

    def inline_shared(self, m, fields):
        """Gives fields of a shared struct type their member list (copied per
        message so each message owns its nested type)."""
        for f in fields:
            if self.is_struct(f) and not f.children:
                if f.elem not in m.shared:
                    raise SchemaError(f'{f.where}: unknown type {f.elem!r}')
                f.children = m.shared[f.elem].fields
            if f.children:
                self.inline_shared(m, f.children)

    def fill_decls(self, m, qual, fields):
        out = []
        declared = set()
        for f in fields:
            if self.is_struct(f) and f.children and f.elem not in declared:
                declared.add(f.elem)
                out.extend(self.fill_decls(m, f'{qual}::{f.elem}', f.children))
        out.append(f'inline void fill_random({qual}& s, fill_context& c, int16_t version);')
        out.append(f'inline void fill_value({qual}& s, fill_context& c, int16_t version) {{ fill_random(s, c, version); }}')
        return out


def conv_view(fld, name):
    if fld.elem == 'string':
        return f'std::string_view(*{name})'
    return f'std::span<const uint8_t>(*{name})'


def write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, 'w') as f:
        f.write(text)


def main():
    # gen_messages.py [--selftest] OUT_DIR SCHEMA...
    args = sys.argv[1:]
    selftest = bool(args) and args[0] == '--selftest'
    if selftest:
        args = args[1:]
    out_dir = args[0]
    messages = []
    for p in args[1:]:
        messages.extend(d for d in parse_file(p) if isinstance(d, Message))
    seen = set()
    for m in messages:
        if m.name in seen:
            raise SchemaError(f'{m.where}: duplicate message {m.name}')
        seen.add(m.name)
    if selftest:
        Gen(messages, 'selftest_messages', 'sluice::protocol::selftest', tables=False).run(out_dir)
    else:
        Gen(messages).run(out_dir)


if __name__ == '__main__':
    try:
        main()
    except SchemaError as e:
        print(f'gen_messages: {e}', file=sys.stderr)
        sys.exit(1)
