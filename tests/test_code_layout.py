"""Units of code in other languages than Python, laid out by indentation."""

from __future__ import annotations

from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.engine._code import code_layout


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


def test_a_question_about_a_jsdoc_keeps_it():
    # The JSDoc of a function is what "Fix JSDoc for ..." asks about: it weighs as code then.
    from jeeves_mcp.pruning.engine._planner import ABOUT_DOCS

    for question in ("Fix JSDoc for Router constructor", "javadoc: link the builder",
                     "rustdoc warnings in lib.rs", "godoc for Open"):
        assert ABOUT_DOCS.search(question), question
    lines = []
    for k in range(40):
        lines += ["/**", f" * Handles route number {k}.", " * @param {{Object}} req", " */",
                  f"function handle{k}(req) {{", f"  return req.route({k});", "}", ""]
    lines += ["/**", " * Initialize a new `Router` with the given `options`.", " *",
              " * @param {Object} options", " * @return {Router} which is a callable function",
              " */", "function Router(options) {", "  this.stack = [];", "}"]
    sel = select_lines(lines, "Fix JSDoc for Router constructor", "code", path="lib/router/index.js")
    assert sel.keep[lines.index(" * @param {Object} options")]
