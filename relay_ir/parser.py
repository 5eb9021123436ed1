"""The Relay text parser: hand-written recursive descent over the lexer's tokens.

Grammar (informal):

    module   := (typedef | def)*  [#[metadata] section]
    typedef  := 'type' Name ['[' tvars ']'] '{' [ctor (',' ctor)* [',']] '}'
    def      := 'def' @name ['[' tvars ']'] '(' params ')' ['->' type] '{' block '}'
    block    := (('let' %x [':' type] '=' expr | %N '=' expr) ';')* expr
    expr     := primary ('(' args ')' | '[' types ']' '(' args ')' | '.' INT)*
    primary  := %x | %N | @f | number | True | False | '(' ')' | '(' expr ')' | '(' expr ',' ... ')'
              | '{' block '}' | fn | if | match | ref(...) | ref_read(...) | ref_write(...)
              | Ctor | op.name | meta[relay.Constant][i]

Every ParseError names the line and column and shows the source line with a caret.

Outside strings and comments the text is ASCII: any other character (U+00E9 'é', a
typographic quote, a non-breaking space, NUL, a lone surrogate) is a ParseError naming it.
Literals must fit their type, as in TVM: an unsuffixed integer is an int32 and a suffixed
one its dtype's range (`2147483648` needs `i64`); a float must be finite in its dtype and
not round a non-zero value to 0 (`1e999f`, `1e-999f`); a dimension is an int64 >= 0; a tuple
field or metadata index an int32 >= 0. Nesting (parentheses, calls, blocks, fn, if, types,
patterns) deeper than MAX_DEPTH (120) is a ParseError; chains of lets and of graph bindings
(`%0 = ...; %1 = ...`), what printed models are made of, are parsed by loops, at any length.

    >>> mod = parse("def @main(%x: Tensor[(2,), float32]) { (%x, %x) }")
    >>> len(mod["main"].body.fields)
    2
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relay_ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.lexer import (
    EOF,
    GLOBAL,
    GRAPH,
    IDENT,
    LOCAL,
    NUMBER,
    PUNCT,
    STRING,
    Token,
    parse_error,
    split_metadata,
    tokenize,
)
from relay_ir.module import IRModule
from relay_ir.parse_attrs import attr_type_problem
from relay_ir.parse_base import (
    DTYPES,
    INDEX_MAX,
    KEYWORDS,
    MAX_DEPTH,
    RESERVED_TYPE_NAMES,
    ParserBase,
)
from relay_ir.ty import (
    GlobalTypeVar,
    Type,
    TypeData,
    TypeVar,
)
from tessel_errors import ParseError, RelayError


class _Parser(ParserBase):
    def __init__(
        self, text: str, name: str, init: IRModule | None, free_vars_ok: bool
    ) -> None:
        program, meta_text, meta_line = split_metadata(text)
        self.text = text
        self.name = name
        self.toks = tokenize(program, name)
        self.pos = 0
        self.depth = 0
        self.free_vars_ok = free_vars_ok
        self.free: dict[str, Var] = {}
        self.scopes: list[dict[str, Var]] = []
        self.type_scopes: list[dict[str, TypeVar]] = []
        self.graph: dict[str, Expr] = {}
        self.functions: dict[GlobalVar, Function] = dict(init.functions) if init else {}
        self.globals = {gv.name_hint: gv for gv in self.functions}
        self.typedefs: dict[GlobalTypeVar, TypeData] = dict(init.type_definitions) if init else {}
        self.type_names = {gtv.name: gtv for gtv in self.typedefs}
        self.ctors = {c.name_hint: c for td in self.typedefs.values() for c in td.constructors}
        self.meta = self._parse_metadata(meta_text, meta_line)
        self.meta_nodes: dict[int, Constant] = {}

    # --- module --------------------------------------------------------------------------

    def parse_module(self) -> IRModule:
        self._predeclare()
        # Type definitions first, so function bodies may use constructors defined later.
        items: list[tuple[str, int]] = []
        while self.peek().kind != EOF:
            tok = self.peek()
            if self.at("type", IDENT):
                items.append(("type", self.pos))
                self._parse_typedef()
            elif self.at("def", IDENT):
                items.append(("def", self.pos))
                self._skip_def()
            else:
                raise self.error(f"expected 'def' or 'type' at top level, got {tok.describe()}")
        for kind, start in items:
            if kind == "def":
                self.pos = start
                self._parse_def()
        return IRModule(self.functions, self.typedefs)

    def _predeclare(self) -> None:
        depth = 0
        seen_types: set[str] = set()
        seen_defs: set[str] = set()
        for i, tok in enumerate(self.toks):
            if tok.kind == PUNCT and tok.value == "{":
                depth += 1
            elif tok.kind == PUNCT and tok.value == "}":
                depth -= 1
            elif depth == 0 and tok.kind == IDENT and tok.value in ("type", "def"):
                nxt = self.toks[min(i + 1, len(self.toks) - 1)]
                if tok.value == "type" and nxt.kind == IDENT:
                    if nxt.value in RESERVED_TYPE_NAMES or "." in nxt.value:
                        raise self.error(f"{nxt.value!r} cannot be the name of a type", nxt)
                    if nxt.value in seen_types or nxt.value in self.type_names:
                        raise self.error(f"type {nxt.value} is defined twice", nxt)
                    seen_types.add(nxt.value)
                    self.type_names[nxt.value] = GlobalTypeVar(nxt.value)
                elif tok.value == "def" and nxt.kind == GLOBAL:
                    if nxt.value in seen_defs or nxt.value in self.globals:
                        raise self.error(f"global function @{nxt.value} is defined twice", nxt)
                    seen_defs.add(nxt.value)
                    self.globals[nxt.value] = GlobalVar(nxt.value)

    def _skip_def(self) -> None:
        # Find the body's braces; the def itself is parsed once every type is known.
        start = self.pos
        self.next()
        while not self.at("{") and self.peek().kind != EOF:
            if self.at("def", IDENT) or self.at("type", IDENT):
                break
            self.next()
        if not self.at("{"):
            self.pos = start
            self._parse_def()  # reports the real error
            raise self.error("expected '{' to start the function body")
        depth = 0
        while True:
            tok = self.next()
            if tok.kind == EOF:
                raise self.error("unclosed '{' in function body: missing '}'", self.toks[start])
            if tok.kind == PUNCT and tok.value == "{":
                depth += 1
            elif tok.kind == PUNCT and tok.value == "}":
                depth -= 1
                if depth == 0:
                    return

    def _parse_def(self) -> None:
        start = self.expect("def")
        name_tok = self.expect_kind(GLOBAL, "a global name like @main after 'def'")
        gv = self.globals[name_tok.value]
        self.graph = {}
        self.functions[gv] = self._parse_function_rest(start)

    def _parse_typedef(self) -> None:
        start = self.expect("type")
        name_tok = self.expect_kind(IDENT, "a type name after 'type'")
        gtv = self.type_names[name_tok.value]
        tvars = self._parse_type_params() if self.at("[") else ()
        self.type_scopes.append({tv.name: tv for tv in tvars})
        self.expect("{", f"to start the constructors of type {gtv.name}")
        ctors: list[Constructor] = []
        while not self.at("}"):
            ctok = self.expect_kind(IDENT, "a constructor name")
            bad = ctok.value in KEYWORDS or ctok.value == "_" or "." in ctok.value
            if bad or ctok.value in self.ctors:
                raise self.error(
                    f"constructor name {ctok.value} is a keyword or already used", ctok
                )
            inputs: list[Type] = []
            if self.at("("):
                self.next()
                while not self.at(")"):
                    inputs.append(self.parse_type())
                    if not self.at(")"):
                        self.expect(",", "between constructor fields")
                self.next()
            c = Constructor(ctok.value, tuple(inputs), gtv, len(ctors), span=self.span(ctok))
            ctors.append(c)
            self.ctors[c.name_hint] = c
            if not self.at("}"):
                self.expect(",", "between constructors")
        self.next()
        self.type_scopes.pop()
        self.typedefs[gtv] = TypeData(gtv, tvars, tuple(ctors))
        del start  # typedefs carry no span


    def _parse_function_rest(self, start: Token) -> Function:
        tparams = self._parse_type_params() if self.at("[") else ()
        self.type_scopes.append({tv.name: tv for tv in tparams})
        self.expect("(", "to start the parameter list")
        params: list[Var] = []
        attrs: list[tuple[str, Any]] = []
        scope: dict[str, Var] = {}
        while not self.at(")"):
            if self.peek().kind == IDENT and self.at("=", k=1):
                key = self.next().value
                self.next()
                attrs.append((key, self.parse_attr_value()))
            else:
                if attrs:
                    raise self.error("parameters must come before function attributes")
                tok = self.expect_kind(LOCAL, "a parameter like %x")
                ann = None
                if self.at(":"):
                    self.next()
                    ann = self.parse_type()
                v = Var(tok.value, ann, span=self.span(tok))
                if tok.value in scope:
                    raise self.error(f"parameter %{tok.value} is declared twice", tok)
                scope[tok.value] = v
                params.append(v)
            if not self.at(")"):
                self.expect(",", "between parameters")
        self.next()
        ret = None
        if self.at("->"):
            self.next()
            ret = self.parse_type()
        self.scopes.append(scope)
        self.expect("{", "to start the function body")
        body = self.parse_block()
        self.expect("}", "to close the function body")
        self.scopes.pop()
        self.type_scopes.pop()
        return Function(
            tuple(params), body, ret, tparams, tuple(attrs), span=self.span(start)
        )

    # --- blocks and expressions ----------------------------------------------------------

    def parse_block(self) -> Expr:
        """Bindings then a result; loops, so 10,000 lets need no recursion."""
        links: list[tuple[Var, Expr, Token]] = []
        pushed = 0
        while True:
            tok = self.peek()
            if self.at("let", IDENT):
                self.next()
                vtok = self.expect_kind(LOCAL, "a variable like %x after 'let'")
                ann = None
                if self.at(":"):
                    self.next()
                    ann = self.parse_type()
                self.expect("=", f"after 'let %{vtok.value}'")
                var = Var(vtok.value, ann, span=self.span(vtok))
                # The var is in scope in its own value: recursive closures.
                self.scopes.append({vtok.value: var})
                pushed += 1
                value = self.parse_expr()
                self.expect(";", "after the let-bound value")
                links.append((var, value, tok))
            elif tok.kind == GRAPH and self.at("=", k=1):
                self.next()
                self.next()
                value = self.parse_expr()
                if tok.value in self.graph:
                    raise self.error(f"graph binding %{tok.value} is defined twice", tok)
                self.graph[tok.value] = value
                self.expect(";", f"after the value of %{tok.value}")
            else:
                break
        body = self.parse_expr()
        for _ in range(pushed):
            self.scopes.pop()
        for var, value, tok in reversed(links):
            body = Let(var, value, body, span=self.span(tok))
        return body

    def parse_expr(self) -> Expr:
        if self.at("let", IDENT) or (self.peek().kind == GRAPH and self.at("=", k=1)):
            self.enter()  # a block as a let's value nests (`let %a = let %b = ...`)
            e = self.parse_block()
            self.depth -= 1
            return e
        self.enter()
        start = self.peek()
        e = self.parse_primary()
        while True:
            if self.at("("):
                e = self.parse_call(e, start)
            elif self.at("[") and not isinstance(e, (Constant,)):
                targs = self.parse_type_list("[", "]")
                if not self.at("("):
                    raise self.error("type arguments must be followed by a call '(...)'")
                e = self.parse_call(e, start, targs)
            elif self.at("."):
                self.next()
                itok = self.expect_kind(NUMBER, "a field index after '.'")
                index = self.plain_int(itok, "a tuple field index", INDEX_MAX)
                e = TupleGetItem(e, index, span=self.span(start))
            else:
                break
        self.depth -= 1
        return e

    def parse_call(self, callee: Any, start: Token, targs: tuple[Type, ...] = ()) -> Expr:
        open_tok = self.expect("(")
        args: list[Expr] = []
        kwargs: dict[str, Any] = {}
        while not self.at(")"):
            if self.peek().kind == IDENT and self.at("=", k=1):
                ktok = self.next()
                self.next()
                if ktok.value in kwargs:
                    raise self.error(f"attribute {ktok.value} given twice", ktok)
                kwargs[ktok.value] = self.parse_attr_value()
            else:
                if kwargs:
                    raise self.error("positional arguments must come before attributes")
                args.append(self.parse_expr())
            if not self.at(")"):
                self.expect(",", "between call arguments")
        self.next()
        attrs = None
        if _is_op(callee):
            for key, value in kwargs.items() if callee.attrs_type else ():
                problem = attr_type_problem(callee.attrs_type, key, value)
                if problem:
                    raise self.error(f"op '{callee.name}': attribute {problem}", open_tok)
            try:
                attrs = callee.make_attrs(kwargs) if (kwargs or callee.attrs_type) else None
            except (RelayError, TypeError, ValueError) as e:  # attrs classes may validate
                raise self.error(str(e), open_tok) from None
            if callee.num_inputs >= 0 and len(args) != callee.num_inputs:
                raise self.error(
                    f"op '{callee.name}' takes {callee.num_inputs} argument(s), got {len(args)}",
                    start,
                )
        elif kwargs:
            raise self.error("keyword attributes are only allowed in calls of ops", open_tok)
        return Call(callee, tuple(args), attrs, targs, span=self.span(start))

    def parse_primary(self) -> Any:
        tok = self.peek()
        if tok.kind == LOCAL:
            self.next()
            return self.lookup_local(tok)
        if tok.kind == GRAPH:
            self.next()
            if tok.value not in self.graph:
                raise self.error(f"graph binding %{tok.value} is used before it is defined", tok)
            return self.graph[tok.value]
        if tok.kind == GLOBAL:
            self.next()
            if tok.value not in self.globals:
                if not self.free_vars_ok:
                    raise self.error(f"undefined global function @{tok.value}", tok)
                self.globals[tok.value] = GlobalVar(tok.value)
            return self.globals[tok.value]
        if tok.kind == NUMBER or (tok.kind == PUNCT and tok.value == "-"):
            return self.parse_number_const()
        if tok.kind == PUNCT:
            if tok.value == "(":
                return self.parse_paren()
            if tok.value == "{":
                self.next()
                e = self.parse_block()
                self.expect("}", "to close the block")
                return e
        if tok.kind == IDENT:
            return self.parse_ident_expr(tok)
        if tok.kind == STRING:
            raise self.error("a string can only be an attribute value, as in layout=\"NCHW\"")
        raise self.error(f"expected an expression, got {tok.describe()}")

    def lookup_local(self, tok: Token) -> Var:
        for scope in reversed(self.scopes):
            if tok.value in scope:
                return scope[tok.value]
        if self.free_vars_ok:
            if tok.value not in self.free:
                ann = None
                if self.at(":"):  # the first use of a free var may carry its type
                    self.next()
                    ann = self.parse_type()
                self.free[tok.value] = Var(tok.value, ann, span=self.span(tok))
            return self.free[tok.value]
        names = sorted({n for s in self.scopes for n in s})
        import difflib

        near = difflib.get_close_matches(tok.value, names, n=2)
        hint = f"; did you mean {', '.join('%' + n for n in near)}?" if near else ""
        raise self.error(f"unbound variable %{tok.value}{hint}", tok)

    def parse_paren(self) -> Expr:
        start = self.expect("(")
        if self.at(")"):
            self.next()
            return Tuple((), span=self.span(start))
        first = self.parse_expr()
        if self.at(")"):
            self.next()
            return first
        fields = [first]
        while self.at(","):
            self.next()
            if self.at(")"):
                break
            fields.append(self.parse_expr())
        self.expect(")", "to close the tuple")
        return Tuple(tuple(fields), span=self.span(start))

    def parse_ident_expr(self, tok: Token) -> Any:
        v = tok.value
        if v == "fn":
            self.next()
            return self._parse_function_rest(tok)
        if v == "if":
            self.next()
            self.expect("(", "after 'if'")
            cond = self.parse_expr()
            self.expect(")", "to close the if condition")
            then = self.parse_braced("the true branch")
            self.expect("else", "after the true branch of if")
            if self.at("if", IDENT):
                other = self.parse_expr()
            else:
                other = self.parse_braced("the false branch")
            return If(cond, then, other, span=self.span(tok))
        if v in ("match", "match?"):
            return self.parse_match(tok)
        if v in ("ref", "ref_read", "ref_write"):
            self.next()
            self.expect("(", f"after '{v}'")
            a = self.parse_expr()
            if v == "ref_write":
                self.expect(",", "between the ref and the value of ref_write")
                b = self.parse_expr()
            self.expect(")", f"to close {v}(...)")
            if v == "ref":
                return RefCreate(a, span=self.span(tok))
            if v == "ref_read":
                return RefRead(a, span=self.span(tok))
            return RefWrite(a, b, span=self.span(tok))
        if v in ("True", "False"):
            self.next()
            return Constant(np.array(v == "True"), span=self.span(tok))
        if v == "meta":
            return self.parse_meta_ref()
        if v in self.ctors:
            self.next()
            c = self.ctors[v]
            if not c.inputs and not self.at("("):
                return Call(c, (), span=self.span(tok))  # `Nil` is the value Nil()
            return c
        if v in KEYWORDS:
            raise self.error(f"unexpected keyword '{v}'", tok)
        if not (self.at("(", k=1) or self.at("[", k=1)):
            raise self.error(
                f"unknown name '{v}': an op must be called, as in {v}(...); constructors "
                "need their type defined first",
                tok,
            )
        from relay_ir.op.registry import get_op

        try:
            op = get_op(v)
        except RelayError as e:
            raise self.error(str(e), tok) from None
        self.next()
        return op

    def parse_braced(self, what: str) -> Expr:
        self.expect("{", f"to start {what}")
        e = self.parse_block()
        self.expect("}", f"to close {what}")
        return e

    def parse_match(self, tok: Token) -> Match:
        self.next()
        if not self.at("("):
            raise self.error(f"expected '(' after '{tok.value}'")
        data = self.parse_paren()
        self.expect("{", "to start the match clauses")
        clauses: list[Clause] = []
        while not self.at("}"):
            scope: dict[str, Var] = {}
            lhs = self.parse_pattern(scope)
            self.expect("=>", "after the pattern")
            self.scopes.append(scope)
            rhs = self.parse_braced("the clause") if self.at("{") else self.parse_expr()
            self.scopes.pop()
            clauses.append(Clause(lhs, rhs))
            if not self.at("}"):
                self.expect(",", "between match clauses")
        self.next()
        return Match(data, tuple(clauses), tok.value == "match", span=self.span(tok))

    def parse_pattern(self, scope: dict[str, Var]) -> Pattern:
        self.enter()
        tok = self.peek()
        if tok.kind == IDENT and tok.value == "_":
            self.next()
            p: Pattern = PatternWildcard()
        elif tok.kind == LOCAL:
            self.next()
            ann = None
            if self.at(":"):
                self.next()
                ann = self.parse_type()
            if tok.value in scope:
                raise self.error(f"pattern binds %{tok.value} twice", tok)
            var = Var(tok.value, ann, span=self.span(tok))
            scope[tok.value] = var
            p = PatternVar(var)
        elif tok.kind == IDENT and tok.value in self.ctors:
            self.next()
            c = self.ctors[tok.value]
            subs: list[Pattern] = []
            if self.at("("):
                self.next()
                while not self.at(")"):
                    subs.append(self.parse_pattern(scope))
                    if not self.at(")"):
                        self.expect(",", "between sub-patterns")
                self.next()
            if len(subs) != len(c.inputs):
                raise self.error(
                    f"constructor {c.name_hint} has {len(c.inputs)} field(s), the pattern "
                    f"gives {len(subs)}",
                    tok,
                )
            p = PatternConstructor(c, tuple(subs))
        elif tok.kind == PUNCT and tok.value == "(":
            self.next()
            subs = []
            while not self.at(")"):
                subs.append(self.parse_pattern(scope))
                if not self.at(")"):
                    self.expect(",", "between tuple sub-patterns")
            self.next()
            p = PatternTuple(tuple(subs))
        else:
            raise self.error(
                f"expected a pattern (_, %x, a constructor or a tuple), got {tok.describe()}"
            )
        self.depth -= 1
        return p

def _is_op(x: Any) -> bool:
    return not isinstance(x, Expr) and hasattr(x, "make_attrs")


def _guard(fn: Any, text: str, name: str) -> Any:
    try:
        return fn()
    except RecursionError:
        raise parse_error(
            f"program nested too deeply to parse (more than {MAX_DEPTH} levels)",
            text, 1, 1, 1, name,
        ) from None


def parse(
    text: str, source_name: str = "<string>", init_module: IRModule | None = None
) -> IRModule:
    """Parse Relay text into an IRModule (names from `init_module`, e.g. the prelude, visible).

    >>> parse("def @id(%x) { %x }").get_global_var("id").name_hint
    'id'
    """
    if not isinstance(text, str):
        raise ParseError(f"parse() takes a str, got {type(text).__name__}")

    def run() -> IRModule:
        p = _Parser(text, source_name, init_module, free_vars_ok=False)
        return p.parse_module()

    return _guard(run, text, source_name)


def parse_expr(
    text: str, source_name: str = "<string>", init_module: IRModule | None = None
) -> Expr:
    """Parse one expression; unbound %vars become free Vars (one per name).

    >>> parse_expr("(%a, %a)").fields[0] is parse_expr("(%a, %a)").fields[1]
    False
    """
    if not isinstance(text, str):
        raise ParseError(f"parse_expr() takes a str, got {type(text).__name__}")

    def run() -> Expr:
        p = _Parser(text, source_name, init_module, free_vars_ok=True)
        e = p.parse_block()
        if p.peek().kind != EOF:
            raise p.error(f"unexpected {p.peek().describe()} after the expression")
        return e

    return _guard(run, text, source_name)


def parse_type(text: str, init_module: IRModule | None = None) -> Type:
    """Parse one type, e.g. `Tensor[(n, 3), float32]`.

    >>> parse_type("Tensor[(n, ?), int8]")
    TensorType(shape=(ShapeVar(name='n'), ?), dtype='int8')
    """

    def run() -> Type:
        p = _Parser(text, "<string>", init_module, free_vars_ok=True)
        t = p.parse_type()
        if p.peek().kind != EOF:
            raise p.error(f"unexpected {p.peek().describe()} after the type")
        return t

    return _guard(run, text, "<string>")


__all__ = ["parse", "parse_expr", "parse_type", "DTYPES", "KEYWORDS"]
