"""Units of code in other languages than Python, laid out by indentation."""

from __future__ import annotations

import itertools

from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.engine._code import code_layout
from jeeves_mcp.pruning.engine._strings import spanned_lines


def unit_holding(lines: list[str], path: str, text: str):
    row = next(i for i, line in enumerate(lines) if text in line)
    units = [u for u in code_layout(lines, path).units if u.start <= row <= u.end]
    return min(units, key=lambda u: u.end - u.start)


RUST_PARAMETERS_ONE_A_LINE = [
    "/// Reads the adjacently tagged form.",
    "fn deserialize_adjacently_tagged_enum(",
    "    params: &Parameters,",
    "    variants: &[Variant],",
    ") -> Fragment {",
    "    let this_type = &params.this_type;",
    "    let arms = variants.iter().map(arm);",
    "    quote_block! { #this_type #(#arms)* }",
    "}",
    "",
    "fn other() -> u8 {",
    "    1",
    "}",
]


def test_a_signature_with_one_parameter_a_line_names_its_body():
    # rustfmt (and gofmt, prettier) close the parameters on a line of their own at the
    # function's indent: the body is still the function's, not a nameless block.
    unit = unit_holding(RUST_PARAMETERS_ONE_A_LINE, "de.rs", "quote_block!")
    assert unit.name == "deserialize_adjacently_tagged_enum"
    assert (unit.start, unit.end) == (0, 8)
    assert unit.sig == (1, 4)


def test_a_where_clause_and_a_brace_of_its_own_stay_with_the_signature():
    lines = [
        "impl Registry {",
        "    pub fn register<T>(&mut self, item: T) -> usize",
        "    where",
        "        T: Into<Entry>,",
        "    {",
        "        self.entries.push(item.into());",
        "        self.entries.len()",
        "    }",
        "",
        "    pub fn len(&self) -> usize {",
        "        self.entries.len()",
        "    }",
        "",
        "    pub fn clear(&mut self) {",
        "        self.entries.clear();",
        "    }",
        "",
        "    pub fn first(&self) -> Option<&Entry> {",
        "        self.entries.first()",
        "    }",
        "",
        "    pub fn last(&self) -> Option<&Entry> {",
        "        self.entries.last()",
        "    }",
        "}",
    ]
    unit = unit_holding(lines, "registry.rs", "self.entries.push")
    assert unit.name.startswith("register")
    assert unit.start == 1 and unit.end == 7


def test_a_brace_on_its_own_line_opens_the_body_of_the_signature_above():
    lines = ["public class Cache", "{"]
    for name in ("Evict", "Touch", "Load", "Store", "Clear"):
        lines += [f"    public void {name}(string key)", "    {", f"        entries.{name}(key);", "    }", ""]
    lines.append("}")
    unit = unit_holding(lines, "Cache.cs", "entries.Load")
    assert unit.name == "Load"
    assert (unit.start, unit.end) == (12, 15)


def test_a_go_label_set_one_level_out_does_not_end_its_function():
    lines = [
        "func (w *Walker) Walk(root string) error {",
        "\tqueue := []string{root}",
        "walk:",
        "\tfor len(queue) > 0 {",
        "\t\tdir := queue[0]",
        "\t\tfor _, skip := range w.skipped {",
        "\t\t\tif skip == dir {",
        "\t\t\t\tcontinue walk",
        "\t\t\t}",
        "\t\t}",
        "\t\tqueue = append(queue[1:], w.children(dir)...)",
        "\t}",
        "\treturn nil",
        "}",
    ]
    unit = unit_holding(lines, "walk.go", "append(queue[1:]")
    assert unit.name == "Walk"
    assert (unit.start, unit.end) == (0, 13)


def test_python_except_at_the_margin_is_not_a_label():
    # A Python file `ast` cannot read is laid out by indentation too: `except:` at the
    # margin still ends the `try:` block above it and opens its own.
    lines = [
        "try:",
        "    import fast_json as json",
        "except:",
        "    import json",
        "print 'old syntax'",
    ]
    spans = [(u.start, u.end) for u in code_layout(lines, "compat.py").units]
    assert spans[:2] == [(0, 1), (2, 3)]


def test_a_question_about_a_rust_function_keeps_its_body():
    filler = []
    for k in range(60):
        filler += [f"fn helper_{k}(value: u32) -> u32 {{", f"    value.wrapping_mul({k} + 3)", "}", ""]
    lines = filler + RUST_PARAMETERS_ONE_A_LINE + filler
    sel = select_lines(lines, "how is the adjacently tagged enum deserialized", "code", path="de.rs")
    body = [i for i, line in enumerate(lines) if "quote_block!" in line or "let arms" in line]
    assert all(sel.keep[i] for i in body)


def test_documentation_comments_weigh_as_docstrings():
    lines = [
        "/// Parses a header line.",
        "/// Returns its name and value.",
        "fn parse_header(line: &str) -> (String, String) {",
        "    // split once, at the first colon",
        "    let (name, value) = line.split_once(':').unwrap();",
        "    (name.into(), value.trim().into())",
        "}",
        "",
        "/**",
        " * Joins two paths.",
        " */",
        "function join(a, b) {",
        "  return a + '/' + b;",
        "}",
        "",
        "// Open opens the named file for reading.",
        "func Open(name string) (*File, error) {",
        "\t// the flags of a read",
        "\treturn OpenFile(name, O_RDONLY, 0)",
        "}",
    ]
    prose = code_layout(lines, "mixed.rs").prose
    assert prose == {0, 1, 8, 9, 10, 15}


def test_a_question_about_a_jsdoc_weighs_doc_comments_as_code():
    # "Fix JSDoc for ..." asks about the comments: they stop being prose for it.
    from jeeves_mcp.pruning.engine._planner import ABOUT_DOCS, scored_text
    from jeeves_mcp.pruning.engine._text import query_identifiers, query_terms

    for question in ("Fix JSDoc for Router constructor", "javadoc: link the builder",
                     "rustdoc warnings in lib.rs", "godoc for Open"):
        assert ABOUT_DOCS.search(question), question
    lines = ["/**", " * Initialize a new `Router` with the given `options`.", " *",
             " * @param {Object} options", " */", "function Router(options) {", "  this.stack = [];", "}"]

    def prose(question: str):
        return scored_text(lines, question, "code", "lib/router/index.js", query_terms(question),
                           query_identifiers(question))[1]

    assert prose("Router constructor") == {0, 1, 2, 3, 4}
    assert prose("Fix JSDoc for Router constructor") == frozenset()


def test_comments_inside_a_body_are_not_doc_comments():
    lines = [
        "func (c *Client) Get(key string) (Value, error) {",
        "	// retry until the server answers",
        "	doRetry(ctx)",
        "	// TODO: check the object cache first",
        "	v := object.Lookup(key)",
        "	return v, nil",
        "}",
    ]
    assert code_layout(lines, "client.go").prose == set()


def test_an_unclosed_doc_comment_is_one_line_of_prose():
    lines = ["/** never closed", "function a() {", "  return 1;", "}", "function b() {", "  return 2;", "}"]
    assert code_layout(lines, "a.js").prose == {0}


def test_keys_of_a_yaml_file_are_not_jump_labels():
    lines = [
        "name: CI",
        "on:",
        "  push:",
        "    branches: [main]",
        "jobs:",
        "  build:",
        "    runs-on: ubuntu-latest",
        "    steps:",
        "      - run: make",
        "  test:",
        "    runs-on: ubuntu-latest",
        "    steps:",
        "      - run: make test",
    ]
    spans = {(u.start, u.end) for u in code_layout(lines, ".github/workflows/ci.yml").units}
    assert (1, 3) in spans
    assert all(not (s <= 0 and e >= 4) for s, e in spans)


def test_a_switch_default_is_not_a_jump_label():
    # gofmt sets `case` and `default:` where `switch` is: each opens its own block.
    from jeeves_mcp.pruning.engine._indent import _blocks

    lines = [
        "func kind(c byte) int {",
        "\tswitch c {",
        "\tcase 'a':",
        "\t\treturn 1",
        "\tdefault:",
        "\t\treturn 0",
        "\t}",
        "}",
    ]
    (func,) = _blocks(lines, labels=True)
    assert [(b.start, b.end) for b in func.children] == [(2, 3), (4, 6)]


def test_a_nested_parameter_type_stays_in_the_signature():
    # The `options: {` block inside the parameters is the signature's, not a unit of its own.
    lines = ["export function makeRouter(", "  options: {", "    strict: boolean,", "  },",
             "  handlers: Handler[],", "): Router {"]
    for k in range(4):
        lines += [f"  function handle{k}(req) {{", f"    return req.go({k});", "  }", ""]
    lines += ["  return build(options, handlers);", "}"]
    layout = code_layout(lines, "router.ts")
    assert not any(u.start <= 2 <= u.end for u in layout.units)
    assert {u.name for u in layout.units if u.start <= 8 <= u.end} == {"handle0"}
    assert all(u.heads[0] == (0, 5) for u in layout.units)


def test_a_closing_brace_above_a_lone_brace_opens_nothing():
    lines = ["void f()", "{", "    a();", "}", "{", "    b();", "}"]
    spans = sorted((u.start, u.end) for u in code_layout(lines, "f.c").units)
    assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(spans))


def test_rust_visibility_and_generics_do_not_name_a_unit():
    # `pub(crate) fn field_i(` read as a call was named `pub`; `StructForm<'a>` kept its `<`.
    lines = ["pub(crate) fn field_i(i: usize) -> Ident {", "    Ident::new(i)", "}", "",
             "enum StructForm<'a> {", "    Struct,", "    Tuple(&'a str),", "}"]
    assert [u.name for u in code_layout(lines, "de.rs").units if u.name] == ["field_i", "StructForm"]


RUST_HELP_TEXT = [
    "impl Flag for IgnoreFile {",
    "    fn doc_short(&self) -> &'static str {",
    '        r"Specify additional ignore files."',
    "    }",
    "    fn doc_long(&self) -> &'static str {",
    '        r"',
    "Specifies a path to one or more gitignore formatted rules files.",
    "When specifying multiple ignore files, earlier files have lower precedence.",
    '"',
    "    }",
    "    fn completion_type(&self) -> CompletionType {",
    "        CompletionType::Filename",
    "    }",
    "    fn name_long(&self) -> &'static str {",
    '        "ignore-file"',
    "    }",
    "    fn doc_variable(&self) -> Option<&'static str> {",
    '        Some("PATH")',
    "    }",
    "    fn doc_category(&self) -> Category {",
    "        Category::Filter",
    "    }",
    "}",
]


def test_text_of_a_string_spanning_lines_is_not_indentation():
    # The help text sits at the margin inside its string: read as code, it ended `doc_long`
    # and its impl, and the lines a fix of the text edits were a nameless block.
    unit = unit_holding(RUST_HELP_TEXT, "defs.rs", "earlier files have lower precedence")
    assert unit.name == "doc_long"
    assert unit.owner == "Flag"
    assert (unit.start, unit.end) == (4, 9)
    after = unit_holding(RUST_HELP_TEXT, "defs.rs", "CompletionType::Filename")
    assert after.name == "completion_type"


def test_go_raw_strings_and_js_templates_and_text_blocks_span_lines():
    go = [
        "func newCompletionCmd() *Command {",
        "\tcmd := &Command{",
        "\t\tLong: `Generate the autocompletion script.",
        "",
        "To load completions:",
        "`,",
        "\t}",
        "\treturn cmd",
        "}",
    ]
    js = [
        "function render(items) {",
        "  const row = '`'",
        "  return `",
        "<ul>${items.map(item)}</ul>",
        "`",
        "}",
    ]
    java = [
        "String sql() {",
        '    return """',
        "SELECT name",
        "  FROM users",
        '""";',
        "}",
    ]
    for lines, path, inside, name in (
        (go, "completions.go", "To load completions", "newCompletionCmd"),
        (js, "render.js", "<ul>", "render"),
        (java, "Query.java", "FROM users", "sql"),
    ):
        unit = unit_holding(lines, path, inside)
        assert unit.name == name, path
        assert (unit.start, unit.end) == (0, len(lines) - 1), path


def test_quotes_in_comments_and_one_line_strings_open_no_string():
    lines = [
        "// don't stop at the ` here",
        "func quote(s string) string {",
        '\treturn "`" + s + "\'"',
        "}",
        "",
        "func other() int {",
        "\treturn '`'",
        "}",
    ]
    assert unit_holding(lines, "quote.go", "return \"`\"").name == "quote"
    assert unit_holding(lines, "quote.go", "return '`'").name == "other"


def test_an_unclosed_string_leaves_the_layout_as_it_was():
    lines = [
        "fn first() -> u8 {",
        "    1",
        "}",
        'const BROKEN: &str = r#"never closed";',
        "fn second() -> u8 {",
        "    2",
        "}",
    ]
    assert unit_holding(lines, "lib.rs", "    2").name == "second"
    assert unit_holding(lines, "lib.rs", "    1").name == "first"


def test_methods_of_the_one_class_in_a_namespace_are_units():
    # C# (and a Ruby module, a Java class around one nested class): a block holding one
    # declaration that holds the methods was one unit of the whole file.
    lines = ["using System;", "", "namespace Acme.Json", "{", "    public class Writer", "    {"]
    for k in range(4):
        lines += [
            f"        public void Write{k}(int value)",
            "        {",
            "            if (value > 0)",
            "            {",
            f"                Emit{k}(value);",
            "            }",
            "        }",
            "",
        ]
    lines += ["    }", "}"]
    unit = unit_holding(lines, "Writer.cs", "Emit2(value)")
    assert unit.label == "Writer.Write2"
    assert (unit.start, unit.end) == (22, 28)


def test_containers_nested_past_any_real_code_are_laid_out():
    # Each level a class holding two functions: the layout recursed once a level and
    # 1,200 levels raised RecursionError (the engine then failed open, nothing pruned).
    lines: list[str] = []
    depth = 1200
    for d in range(depth):
        pad = "  " * d
        lines += [f"{pad}class C{d} {{", f"{pad}  fn a{d}() {{", f"{pad}    x", f"{pad}  }}"]
    for d in range(depth - 1, -1, -1):
        pad = "  " * d
        lines += [f"{pad}  fn b{d}() {{", *[f"{pad}    y"] * 20, f"{pad}  }}", f"{pad}}}"]
    units = code_layout(lines, "deep.rs").units
    assert any(u.name == "a0" for u in units)
    assert units[-1].end == len(lines) - 1


def test_a_doc_comment_belongs_to_its_function_alone():
    # The comment glued above a function was also a chunk of its own: two units held it,
    # and both were scored on its words.
    lines = [
        "package walk",
        "",
        "var depth = 3",
        "// Walk visits every node below root, depth first.",
        "// It stops at the first error.",
        "func Walk(root *Node) error {",
        "\tfor _, child := range root.children {",
        "\t\tif err := Walk(child); err != nil {",
        "\t\t\treturn err",
        "\t\t}",
        "\t}",
        "\treturn nil",
        "}",
    ]
    units = code_layout(lines, "walk.go").units
    holding = [u for u in units if u.start <= 3 <= u.end]
    assert [u.name for u in holding] == ["Walk"]
    assert holding[0].start == 3
    assert any(u.start <= 2 <= u.end for u in units)  # the line above is still a unit
    covered = [i for u in units for i in range(u.start, u.end + 1)]
    assert len(covered) == len(set(covered))


def test_calls_spread_over_lines_do_not_cut_a_function_body():
    # `let (a, b) = if ... {` and `Stmts(identifier::generated(` read like `name(` signatures:
    # two of them made the function a container of nameless chunks.
    lines = [
        "fn deserialize_field_identifier(",
        "    fields: &[FieldWithAliases],",
        "    cattrs: &attr::Container,",
        "    has_flatten: bool,",
        ") -> Stmts {",
        "    let (ignore_variant, fallthrough) = if has_flatten {",
        "        let ignore_variant = quote!(__other(_serde::Content<'de>),);",
        "        let fallthrough = quote!(_serde::Ok(__Field::__other(__value)));",
        "        (Some(ignore_variant), Some(fallthrough))",
        "    } else if cattrs.deny_unknown_fields() {",
        "        (None, None)",
        "    } else {",
        "        let ignore_variant = quote!(__ignore,);",
        "        let fallthrough = quote!(_serde::Ok(__Field::__ignore));",
        "        (Some(ignore_variant), Some(fallthrough))",
        "    };",
        "",
        "    Stmts(identifier::deserialize_generated(",
        "        fields,",
        "        has_flatten,",
        "        false,",
        "        ignore_variant,",
        "        fallthrough,",
        "    ))",
        "}",
    ]
    unit = unit_holding(lines, "struct_.rs", "cattrs.deny_unknown_fields()")
    assert unit.name == "deserialize_field_identifier"
    assert (unit.start, unit.end) == (0, len(lines) - 1)


def test_a_regex_literal_holding_a_backquote_opens_no_template():
    # axios: `/^[-_a-zA-Z0-9^`|~,!#$%&'*+.]+$/` turned the rest of the file into a string.
    lines = [
        "const isValidHeaderName = (str) => /^[-_a-zA-Z0-9^`|~,!#$%&'*+.]+$/.test(str.trim());",
        "",
        "function normalizeHeader(header) {",
        "  return header && String(header).trim().toLowerCase();",
        "}",
        "",
        "function normalizeValue(value) {",
        "  return value === false || value == null ? value : String(value);",
        "}",
        "",
        "const message = (name) => `invalid header ${name}`;",
    ]
    assert unit_holding(lines, "AxiosHeaders.js", "toLowerCase").name == "normalizeHeader"
    assert unit_holding(lines, "AxiosHeaders.js", "String(value)").name == "normalizeValue"


def test_rust_c_strings_and_a_string_closing_the_text_are_read():
    lines = [
        "const N: &CStr = c\"{'t': 1}\";",
        "",
        "fn first() -> u8 {",
        "    if true {",
        "        1",
        "    } else {",
        "        2",
        "    }",
        "}",
    ]
    assert unit_holding(lines, "main.rs", "        2").name == "first"
    assert spanned_lines("var usage = `a\nb`", "usage.go").strings == {1}


def test_a_function_around_one_closure_stays_whole():
    # Reading down through a single declaration is for containers (a namespace, a class):
    # a test wrapping one `exec(async () => {` call was cut into twenty fragments.
    body = [f"    const response{k} = await got(`redirect/{k}`);" for k in range(24)]
    lines = [
        "test('redirects are followed', async t => {",
        "  await withServer.exec(async (server, got) => {",
        "    server.get('/', (request, response) => {",
        "      response.end('reached');",
        "    });",
        "    server.get('/redirect', (request, response) => {",
        "      response.writeHead(302, {location: '/'});",
        "    });",
        *body,
        "  });",
        "});",
    ]
    unit = unit_holding(lines, "redirects.ts", "response12")
    assert (unit.start, unit.end) == (0, len(lines) - 1)


def javadoc_method(k: int) -> list[str]:
    return [
        "    /**",
        f"     * Returns the {k}th value, or null when there is none.",
        "     * @param x where to start",
        "     */",
        f"    public Object value{k}(int x) {{",
        "        Object found = lookup(x);",
        f"        return found == null ? null : found.get({k});",
        "    }",
        "",
    ]


def test_a_javadoc_is_part_of_the_method_it_documents():
    # A Javadoc's ` * ` lines sit one column in: read as indentation, `/**` opened a block of
    # its own, a nameless unit apart from its method (a fix to the doc was in no method).
    lines = ["package x;", "", "public class Values {", *itertools.chain.from_iterable(
        javadoc_method(k) for k in range(4)), "}"]
    unit = unit_holding(lines, "Values.java", "Returns the 2th value")
    assert unit.name == "value2"
    assert lines[unit.start].strip() == "/**" and lines[unit.end].strip() == "}"
    assert lines[unit.start + 4].strip().startswith("public Object value2(")


def test_block_comments_are_read_apart_from_strings():
    text = 'const a = "/* no comment */";\n/*\n  if (x) {\n  }\n*/\nconst t = `a\nb`;\n/* one line */'
    spans = spanned_lines(text, "a.ts")
    assert spans.comments == {2, 3, 4}
    assert spans.strings == {6}
    # Unclosed, a comment marks nothing; PHP's comments are read too.
    assert spanned_lines("f();\n/* never\n closed", "a.c").comments == set()
    assert spanned_lines("<?php\n/**\n * Doc.\n */\nfunction f() {}", "f.php").comments == {2, 3}


ARROW_FUNCTIONS = [
    "export const expandIPv6 = (ipV6: string): string => {",
    "  const sections = ipV6.split(':')",
    "  return sections.join(':')",
    "}",
    "",
    "const parseIPv4ToBinary = (",
    "  ipv4: string,",
    "  onInvalid: () => never",
    "): bigint => {",
    "  return BigInt(ipv4.length)",
    "}",
    "",
    "export const build = async <T,>(input: T): Promise<T> => {",
    "  return input",
    "}",
]


def test_functions_assigned_to_names_are_named():
    # `const name = (a: T): R => {` is how TypeScript writes most functions: a return type,
    # type parameters or parameters one a line left them nameless.
    assert unit_holding(ARROW_FUNCTIONS, "ipaddr.ts", "ipV6.split").name == "expandIPv6"
    assert unit_holding(ARROW_FUNCTIONS, "ipaddr.ts", "BigInt(").name == "parseIPv4ToBinary"
    assert unit_holding(ARROW_FUNCTIONS, "ipaddr.ts", "return input").name == "build"
    typed = [
        "const QueryRow: Component<{ query: Query }> = (props) => {",
        "  return props.query",
        "}",
        "class Context {",
        "  redirect = <T extends RedirectStatusCode = 302>(",
        "    location: string,",
        "  ): Response => {",
        "    return this.newResponse(null, 302)",
        "  }",
        *[f"  header{k}(name: string) {{\n    return this.headers.get(name)\n  }}" for k in range(6)],
        "}",
        "(function (undefined) {",
        "  hooks.version = '2.30.1'",
        "})(this)",
    ]
    typed = "\n".join(typed).split("\n")
    assert unit_holding(typed, "row.tsx", "props.query").name == "QueryRow"
    assert unit_holding(typed, "row.tsx", "newResponse").name == "redirect"
    assert unit_holding(typed, "row.tsx", "hooks.version").name == ""  # not `function`


def test_a_name_after_long_modifiers_is_found_and_words_deep_in_a_line_name_nothing():
    # A head's name is looked for among its first words: modifiers and type parameters come
    # before it (here at the 12th word); the words deep in a line of minified code are no
    # function's name.
    from jeeves_mcp.pruning.engine._indent import _label

    head = "public static final synchronized <T extends Comparable<? super T>> List<T> sortedCopy(List<T> xs) {"
    assert _label(head) == "sortedCopy"
    minified = "this.height,c,this.qa,this.Aa,this.cursor,this.ra,this.sa,this.ta,this.pa,this.ua,this.va,t(N) {"
    assert _label(minified) == ""


def test_destructured_parameters_and_else_branches_stay_with_their_head():
    lines = [
        "export const Fragment = ({",
        "  children,",
        "}: {",
        "  Key?: string",
        "  children?: Child[]",
        "}): HtmlEscapedString => {",
        "  return childrenToString(children)",
        "}",
        "",
        "try {",
        "  start()",
        "} catch (err) {",
        "  report(err)",
        "}",
    ]
    unit = unit_holding(lines, "base.ts", "childrenToString")
    assert (unit.start, unit.end, unit.name) == (0, 7, "Fragment")
    assert (unit_holding(lines, "base.ts", "report(err)").start, unit.end) == (9, 7)


def test_type_parameters_are_no_part_of_a_name():
    lines = [
        "export class HonoRequest<P extends string = '/', I extends Input = {}> {",
        *[f"  field{k}: string" for k in range(3)],
        "}",
    ]
    assert unit_holding(lines, "request.ts", "field1").name == "HonoRequest"


def test_callbacks_do_not_cut_a_function_body_but_named_functions_do():
    # `proc.on('error', (err) => {` is a call, not a declaration: a function passing two
    # callbacks was cut into a dozen nameless chunks (`_executeSubCommand.if`).
    filler = [f"    const step{k} = prepare({k});" for k in range(20)]
    lines = [
        "class Command {",
        "  executeSubCommand(subcommand, args) {",
        "    const sourceExt = ['.js', '.ts'];",
        *filler,
        "    signals.forEach((signal) => {",
        "      process.on(signal, () => proc.kill(signal));",
        "    });",
        "    proc.on('error', (err) => {",
        "      throw err;",
        "    });",
        "  }",
        "",
        "  outer() {",
        "    const first = (a) => {",
        "      return a + 1;",
        "    };",
        *filler,
        "    const second = function (b) {",
        "      return b * 2;",
        "    };",
        "    return first(second(1));",
        "  }",
        "}",
    ]
    unit = unit_holding(lines, "index.js", "sourceExt")
    assert (unit.name, lines[unit.end]) == ("executeSubCommand", "  }")
    assert unit_holding(lines, "index.js", "return a + 1").name == "first"
    assert unit_holding(lines, "index.js", "return b * 2").name == "second"


def test_a_block_with_no_name_inside_a_function_is_labelled_by_the_function():
    helper = [f"    const v{k} = k{k};" for k in range(20)]
    lines = [
        "function generateEndpoint(definition) {",
        "  function generateName(name) {",
        *helper,
        "  }",
        "  if (definition.requestBody) {",
        "    addBody(definition);",
        "  }",
        "  function propertyName(name) {",
        "    return name;",
        "  }",
        "}",
    ]
    unit = unit_holding(lines, "generate.ts", "addBody")
    assert (unit.name, unit.label) == ("", "generateEndpoint")


def test_tests_are_named_by_their_titles():
    # Every test of a file was named `it` (or had no name at all in RSpec): a marker said
    # "hors focus: it, it +12".
    steps = [f"    const step{k} = await load({k});" for k in range(12)]
    lines = [
        "describe('Router', () => {",
        "  it('returns 404 when the route is missing', async () => {",
        *steps,
        "  });",
        "  it('matches params', async () => {",
        *steps,
        "  });",
        "});",
    ]
    unit = unit_holding(lines, "router.test.ts", "step3")
    assert unit.label == "Router.returns 404 when the route is missing"
    rspec = [
        "RSpec.describe Router do",
        "  context 'when the route is missing' do",
        *[f"    it 'answers {k}' do\n      expect(get({k})).to be_missing\n    end" for k in range(8)],
        "  end",
        "end",
    ]
    rspec = "\n".join(rspec).split("\n")
    assert unit_holding(rspec, "router_spec.rb", "get(3)").label == (
        "when the route is missing.answers 3")


def test_a_swift_extension_is_named_by_the_type_it_extends():
    lines = [
        "extension Request: CustomDebugStringConvertible {",
        *[f"    var part{k}: String {{ \"{k}\" }}" for k in range(4)],
        "}",
        "",
        "fileprivate extension Color {",
        "    static let accent = Color(red: 1)",
        "}",
    ]
    assert unit_holding(lines, "Request.swift", "part2").name == "Request"
    assert unit_holding(lines, "Request.swift", "accent").name == "Color"


def test_a_regex_literal_at_the_head_of_a_line_opens_no_comment():
    # `[\w{}/*\s,]` in a regex at the head of a line opened a comment that ran to the
    # `'src/**/*'` below and merged two functions (review 14).
    text = "\n".join([
        "export default defineConfig({",
        "  plugins: [",
        "    replace(",
        "      /(im|ex)port\\s[\\w{}/*\\s,]+from\\s['\"]/gm,",
        "      'x',",
        "    ),",
        "  ],",
        "  include: ['src/**/*'],",
        "})",
        "const ratio = total / count / 2",
        "/* a real",
        "   comment */",
    ])
    assert spanned_lines(text, "vite.config.ts").comments == {11}


def test_names_the_review_found_missing_or_wrong():
    lines = [
        "  select: function select($selectable) {",
        "    return $selectable;",
        "  },",
        "  test.serial('times out', async t => {",
        "    await t.throwsAsync(run());",
        "  });",
        "  it('doesn\\'t retry', () => {",
        "    expect(calls).toBe(1);",
        "  });",
        "impl From<io::Error> for CommandError {",
        "    fn from(e: io::Error) -> Self { Self::Io(e) }",
        "}",
    ]
    assert unit_holding(lines, "typeahead.js", "return $selectable").name == "select"
    assert unit_holding(lines, "timeout.ts", "throwsAsync").name == "times out"
    assert unit_holding(lines, "retry.ts", "toBe(1)").name == "doesn't retry"
    assert unit_holding(lines, "error.rs", "Self::Io").name == "From<io::Error>"


def test_a_rust_test_module_is_read_down_to_its_tests():
    tests = [f"    #[test]\n    fn parses_{k}() {{\n        assert_eq!(parse(\"{k}\"), Ok({k}));\n    }}\n"
             for k in range(6)]
    lines = "\n".join([
        "macro_rules! ok {",
        "    ($e:expr) => { Ok($e) };",
        "}",
        "",
        "#[cfg(test)]",
        "mod tests {",
        "    use super::*;",
        "",
        *tests,
        "}",
    ]).split("\n")
    assert unit_holding(lines, "parse.rs", 'parse("3")').name == "parses_3"
    assert unit_holding(lines, "parse.rs", "Ok($e)").name == "ok"


def test_lines_between_a_class_s_methods_are_the_class_s():
    """A class's fields and constants, outside its methods, are scored under its name (Java by
    indentation, Python through ast): a question naming the class finds them."""
    java = [
        "class RetrySettings {",
        "    void open() {",
        "        state.open();",
        "    }",
        "",
        "    private int timeoutSeconds = 30;",
        "    private int retries = 3;",
        "",
        *(line for name in ("close", "flush", "reset", "render")
          for line in (f"    void {name}() {{", f"        state.{name}();", "        count += 1;", "    }", "")),
        "}",
    ]
    python = [
        "class RetrySettings:",
        "    def open(self):",
        "        self.state.open()",
        "",
        "    timeout_seconds = 30",
        "    retries = 3",
        "",
        "    def close(self):",
        "        self.state.close()",
    ]
    for lines, path, field in ((java, "Settings.java", 5), (python, "settings.py", 4)):
        unit = next(u for u in code_layout(lines, path).units if u.start <= field <= u.end)
        assert not unit.name and unit.owner == "RetrySettings", path
