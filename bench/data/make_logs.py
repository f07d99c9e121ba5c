"""Rebuild bench/data/logs.jsonl by running real failing commands on this machine.

    python bench/data/make_logs.py [--out bench/data/logs.jsonl]

Needs python3 (with pytest in the interpreter running this script), gcc, g++,
make, cargo, node, npm, javac/java, cmake and bash. Each scenario writes a small
project into a temporary directory, runs a real command that fails (a test run,
a build, a script that crashes), and records its combined stdout and stderr,
with ANSI colours removed and the temporary directory renamed /tmp/work.

gold = [first, last] (1-based over text.split("\\n")): the lines that explain the
failure, found by a rule per tool, never by the engine:
- traceback: the last "Traceback (most recent call last):" line through the
  exception line after it (the first line no more indented than the Traceback
  line that is not a chaining note);
- pytest: in the FAILURES (or ERRORS) section, the first line starting with ">"
  through the next "path:line: Type" location line;
- gcc: the first ": error:" line, with the "In function" line just before it,
  through the source and caret lines ("  N | ...", "    | ^") right after it;
- ld: the "in function" line before the first "undefined reference" through the
  "ld returned 1 exit status" line;
- rustc: the first line starting with "error" through the line before the next
  blank line;
- javac: the first ": error:" line through the following indented lines;
- java / node: the exception line through the last "at ..." frame after it
  (node: from the "file:line" header that precedes it);
- npm: the first run of "npm error" lines;
- cmake: the first "CMake Error" line through the line before "-- Configuring incomplete";
- cargo test: the "---- name stdout ----" line through the end of the paragraph after it;
- pytest collection: the line after "ERROR collecting" through the first "E   " line;
- TAP: the "not ok" line through the "..." that ends its YAML block;
- compileall: the "***   File" line through the "SyntaxError" line;
- line: the first line matching the scenario's pattern (a single-line failure).
The question is what an agent that ran the command would ask, written per scenario
without looking at the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def run(cmd: str, cwd: Path, timeout: int = 300) -> str:
    env = dict(os.environ, NO_COLOR="1", TERM="dumb", CARGO_TERM_COLOR="never", PYTHONHASHSEED="0")
    p = subprocess.run(
        cmd,
        shell=True,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    out = ANSI.sub("", p.stdout.decode("utf-8", "replace")).replace(str(cwd), "/tmp/work")
    return out.replace("\r\n", "\n").rstrip("\n")


def write(d: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(body).lstrip("\n"))


# ------------------------------------------------------------------ gold rules


def g_traceback(lines: list[str]) -> tuple[int, int]:
    a = max(i for i, x in enumerate(lines) if "Traceback (most recent call last):" in x)
    ind = len(lines[a]) - len(lines[a].lstrip())
    for j in range(a + 1, len(lines)):
        x = lines[j][ind:]
        if (
            x.strip()
            and not x[:1].isspace()
            and not x.startswith(("During handling", "The above exception"))
        ):
            return a, j
    raise ValueError("no exception line")


def g_pytest(lines: list[str]) -> tuple[int, int]:
    sec = next(i for i, x in enumerate(lines) if re.match(r"^=+ (FAILURES|ERRORS) =+$", x))
    a = next(i for i in range(sec, len(lines)) if lines[i].startswith(">"))
    b = next(i for i in range(a, len(lines)) if re.match(r"^[\w/.\-]+:\d+: \w+", lines[i]))
    return a, b


def g_gcc(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if ": error:" in x or ": fatal error:" in x)
    b = a
    while b + 1 < len(lines) and re.match(r"^\s+(\d+\s)?\|", lines[b + 1]):
        b += 1
    if (a > 0 and "In function" in lines[a - 1]) or (
        a > 0 and "In member function" in lines[a - 1]
    ):
        a -= 1
    return a, b


def g_ld(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if "undefined reference" in x)
    if a > 0 and "in function" in lines[a - 1]:
        a -= 1
    b = next(i for i in range(a, len(lines)) if "ld returned 1 exit status" in lines[i])
    return a, b


def g_rustc(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if re.match(r"^error(\[E\d+\])?:", x))
    b = a
    while b + 1 < len(lines) and lines[b + 1].strip():
        b += 1
    return a, b


def g_javac(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if ": error:" in x)
    b = a
    while b + 1 < len(lines) and (
        lines[b + 1][:1].isspace()
        or lines[b + 1].lstrip().startswith("^")
        or (b == a and lines[b + 1].strip())
    ):
        b += 1
    return a, b


def g_stack(lines: list[str]) -> tuple[int, int]:
    a = next(
        i
        for i, x in enumerate(lines)
        if re.match(r"^(Exception in thread|\w*(Error|Exception)\b.*:|Uncaught )", x)
    )
    b = a
    while b + 1 < len(lines) and re.match(r"^\s+(at |\.\.\. \d+ more|Caused by)", lines[b + 1]):
        b += 1
    if a >= 4 and re.match(r"^/\S+:\d+$", lines[a - 4] if not lines[a - 1].strip() else ""):
        a -= 4  # node: "file:line", source line, caret, blank
    return a, b


def g_npm(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if x.startswith(("npm error", "npm ERR!")))
    b = a
    while b + 1 < len(lines) and lines[b + 1].startswith(("npm error", "npm ERR!")):
        b += 1
    return a, b


def g_cmake(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if x.startswith("CMake Error"))
    b = (
        next(i for i in range(a, len(lines)) if lines[i].startswith("-- Configuring incomplete"))
        - 1
    )
    while not lines[b].strip():
        b -= 1
    return a, b


def g_cargo_test(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if re.match(r"^---- \S+ stdout ----$", x))
    b = a + 1
    while not lines[b].strip():
        b += 1
    while b + 1 < len(lines) and lines[b + 1].strip():
        b += 1
    return a, b


def g_collect(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if "ERROR collecting" in x) + 1
    b = next(i for i in range(a, len(lines)) if lines[i].startswith("E   "))
    return a, b


def g_tap(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if re.match(r"^\s*not ok \d+ - ", x))
    b = next(i for i in range(a, len(lines)) if lines[i].strip() == "...")
    return a, b


def g_compileall(lines: list[str]) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if x.startswith("***"))
    b = next(i for i in range(a, len(lines)) if lines[i].startswith("SyntaxError"))
    return a, b


def g_line(pattern: str):
    def rule(lines: list[str]) -> tuple[int, int]:
        a = next(i for i, x in enumerate(lines) if re.search(pattern, x))
        return a, a

    return rule


# ------------------------------------------------------------------- scenarios

PY = sys.executable


def pytest_suite(d: Path, bad: str, modules: int = 8, tests: int = 25) -> None:
    files = {}
    for m in range(modules):
        body = ["import pytest\n\nfrom app.core import normalise, parse_config, Inventory\n"]
        for t in range(tests):
            body.append(
                f"def test_case_{m}_{t}():\n    assert normalise('  Item{t} ') == 'item{t}'\n"
            )
        files[f"tests/test_mod{m}.py"] = "\n".join(body)
    files["app/__init__.py"] = ""
    files["app/core.py"] = """
        import json

        def normalise(s):
            return s.strip().lower()

        def parse_config(text):
            data = json.loads(text)
            return {k.lower(): v for k, v in data.items()}

        class Inventory:
            def __init__(self):
                self.items = {}

            def add(self, name, qty):
                self.items[name] = self.items.get(name, 0) + qty

            def remove(self, name, qty):
                left = self.items[name] - qty
                if left < 0:
                    raise ValueError(f"not enough {name}: have {self.items[name]}, want {qty}")
                self.items[name] = left
        """
    files["tests/test_zbad.py"] = bad
    files["conftest.py"] = "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"
    write(d, files)


def py_logging_script(d: Path, crash: str, steps: int = 250) -> None:
    write(
        d,
        {
            "job.py": f"""
        import logging, json, os, sys
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            datefmt="2025-01-01 12:00:00", stream=sys.stdout)
        log = logging.getLogger("job")

        def step(i):
            log.info("processed batch %d: %d records, checksum %08x", i, 100 + i % 7, (i * 2654435761) % 2**32)

        {textwrap.indent(textwrap.dedent(crash), "        ").strip()}

        for i in range({steps}):
            step(i)
            if i % 50 == 49:
                log.warning("batch %d slower than expected (%.1fs)", i, 1.5 + i / 100)
        main()
        """
        },
    )


SCENARIOS: list[tuple[str, str, object, callable]] = []


def scenario(name: str, question: str, rule):
    def deco(fn):
        SCENARIOS.append((name, question, rule, fn))
        return fn

    return deco


@scenario("pytest-assert-dict", "Why does test_parse_config fail?", g_pytest)
def _(d):
    pytest_suite(
        d,
        """
        from app.core import parse_config

        def test_parse_config():
            cfg = parse_config('{"Name": "shop", "Port": 8080, "Debug": false}')
            assert cfg == {"name": "shop", "port": "8080", "debug": False}
        """,
    )
    return run(f"{PY} -m pytest -v -p no:cacheprovider tests", d)


@scenario("pytest-valueerror", "The inventory tests fail, what goes wrong?", g_pytest)
def _(d):
    pytest_suite(
        d,
        """
        from app.core import Inventory

        def test_restock_then_sell():
            inv = Inventory()
            inv.add("apple", 3)
            inv.remove("apple", 2)
            inv.remove("apple", 2)
            assert inv.items["apple"] == 0
        """,
        modules=10,
    )
    return run(f"{PY} -m pytest -v -p no:cacheprovider tests", d)


@scenario("pytest-fixture-error", "Why does the database fixture fail to set up?", g_pytest)
def _(d):
    pytest_suite(
        d,
        """
        import pytest, sqlite3

        @pytest.fixture
        def db():
            conn = sqlite3.connect(":memory:")
            conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
            conn.execute("INSERT INTO user (name) VALUES ('ann')")
            yield conn

        def test_users(db):
            assert db.execute("SELECT count(*) FROM users").fetchone() == (1,)
        """,
        modules=6,
    )
    return run(f"{PY} -m pytest -v -p no:cacheprovider tests", d)


@scenario(
    "pytest-param",
    "which parametrized case of test_normalise fails and what was expected?",
    g_pytest,
)
def _(d):
    pytest_suite(
        d,
        """
        import pytest
        from app.core import normalise

        @pytest.mark.parametrize("raw,want", [("A", "a"), (" b ", "b"), ("Ç", "ç"), ("x y", "x_y"), ("Q", "q")])
        def test_normalise(raw, want):
            assert normalise(raw) == want
        """,
        modules=12,
        tests=20,
    )
    return run(f"{PY} -m pytest -v -p no:cacheprovider tests", d)


@scenario("pytest-keyerror-deep", "Why does the report test crash?", g_pytest)
def _(d):
    pytest_suite(
        d,
        """
        def totals(rows):
            out = {}
            for r in rows:
                out[r["region"]] = out.get(r["region"], 0) + r["amount"]
            return out

        def render(rows):
            t = totals(rows)
            return "\\n".join(f"{k}: {v}" for k, v in sorted(t.items()))

        def test_report():
            rows = [{"region": "eu", "amount": 3}, {"regoin": "us", "amount": 4}]
            assert render(rows) == "eu: 3\\nus: 4"
        """,
        modules=9,
    )
    return run(f"{PY} -m pytest -v -p no:cacheprovider --tb=long tests", d)


@scenario("pytest-quiet-many", "what failed in the test run?", g_pytest)
def _(d):
    pytest_suite(
        d,
        """
        import math

        def test_area():
            assert math.isclose(math.pi * 2 ** 2, 12.56, rel_tol=1e-6)
        """,
        modules=20,
        tests=30,
    )
    return run(f"{PY} -m pytest -rA -p no:cacheprovider tests", d)


@scenario("py-zerodiv", "Why did the job crash at the end?", g_traceback)
def _(d):
    py_logging_script(
        d,
        """
        def average(values):
            return sum(values) / len(values)

        def summarise(batches):
            return {name: average(v) for name, v in batches.items()}

        def main():
            log.info("summarising")
            print(summarise({"a": [1, 2], "b": []}))
        """,
    )
    return run(f"{PY} job.py", d)


@scenario("py-chained", "What is the root cause of the RuntimeError?", g_traceback)
def _(d):
    py_logging_script(
        d,
        """
        SETTINGS = {"timeout": 3}

        def lookup(key):
            try:
                return SETTINGS[key]
            except KeyError as e:
                raise RuntimeError(f"missing setting {key!r}") from e

        def main():
            log.info("reading settings")
            lookup("retries")
        """,
        steps=400,
    )
    return run(f"{PY} job.py", d)


@scenario("py-filenotfound", "why does the script fail to load its configuration", g_traceback)
def _(d):
    py_logging_script(
        d,
        """
        def load(path):
            with open(path) as f:
                return json.load(f)

        def main():
            cfg = load(os.path.join("conf", "settings.json"))
            log.info("loaded %s", cfg)
        """,
        steps=180,
    )
    return run(f"{PY} job.py", d)


@scenario("py-json", "The import step fails while parsing the payload. Why?", g_traceback)
def _(d):
    py_logging_script(
        d,
        """
        def parse(payload):
            return json.loads(payload)

        def import_step(raw):
            return [parse(x) for x in raw]

        def main():
            import_step(['{"a": 1}', '{"b": 2,}'])
        """,
        steps=300,
    )
    return run(f"{PY} job.py", d)


@scenario("py-recursion", "the tree walk blows up, what happened?", g_traceback)
def _(d):
    py_logging_script(
        d,
        """
        def depth(node):
            return 1 + depth(node["children"][0]) if node["children"] else 1

        def main():
            a = {"children": []}
            a["children"].append(a)
            log.info("depth %d", depth(a))
        """,
        steps=120,
    )
    return run(f"{PY} job.py", d)


@scenario("py-syntax", "Why won't the module compile?", g_compileall)
def _(d):
    mods = {f"pkg/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(60)}
    mods["pkg/m37.py"] = "def f37(x):\n    if x > 3\n        return x\n    return 0\n"
    write(d, mods)
    return run(f"{PY} -m compileall -f pkg", d)


@scenario("unittest-fail", "Why does TestCart fail?", g_traceback)
def _(d):
    body = ["import unittest\n"]
    for k in range(15):
        body.append(
            f"class TestThing{k}(unittest.TestCase):\n"
            + "".join(
                f"    def test_{j}(self):\n        self.assertEqual({j} * 2, {j} + {j})\n"
                for j in range(12)
            )
        )
    body.append("""class TestCart(unittest.TestCase):
    def test_total(self):
        prices = [19.99, 5.01, 0.1]
        self.assertEqual(round(sum(prices) * 1.25, 2), 31.37)
""")
    body.append("if __name__ == '__main__':\n    unittest.main(verbosity=2)\n")
    write(d, {"test_shop.py": "\n".join(body)})
    return run(f"{PY} test_shop.py", d)


@scenario("pip-build-error", "pip install of the local package fails, why?", g_traceback)
def _(d):
    write(
        d,
        {
            "pkg/setup.py": """
        from setuptools import setup
        import platform
        if not platform.machine().startswith("arm"):
            raise RuntimeError("this package only builds on ARM, found " + platform.machine())
        setup(name="armonly", version="1.0")
        """
        },
    )
    return run(f"{PY} -m pip install --no-build-isolation --no-index -v ./pkg", d)


def c_project(d: Path, bad: str, n: int = 40, flags: str = "-Wall") -> None:
    files = {}
    for i in range(n):
        files[f"src/unit{i:02d}.c"] = (
            f"#include <stdio.h>\nint unit{i:02d}(int x) {{ return x * {i} + 1; }}\n"
        )
    files["src/zz_bad.c"] = bad
    objs = " ".join(f"build/unit{i:02d}.o" for i in range(n)) + " build/zz_bad.o"
    files["Makefile"] = (
        f"CFLAGS={flags}\nall: app\napp: {objs} build/main.o\n\t$(CC) -o $@ $^\n"
        "build/%.o: src/%.c\n\t@mkdir -p build\n\t$(CC) $(CFLAGS) -c $< -o $@\n"
    )
    files["src/main.c"] = "int main(void) { return 0; }\n"
    write(d, files)


@scenario("gcc-undeclared", "Why does make fail?", g_gcc)
def _(d):
    c_project(
        d,
        """
        #include <string.h>
        int checksum(const char *s) {
            int total = 0;
            for (size_t i = 0; i < strlen(s); i++)
                total += s[i];
            return totl;
        }
        """,
    )
    return run("make -k -j1", d)


@scenario("gcc-syntax", "What is the compile error in the build?", g_gcc)
def _(d):
    c_project(
        d,
        """
        struct point { int x; int y; }
        int norm1(struct point p) { return p.x + p.y; }
        """,
        n=55,
    )
    return run("make -j1", d)


@scenario("gcc-werror", "the build fails with -Werror, which warning is it?", g_gcc)
def _(d):
    c_project(
        d,
        """
        #include <stdlib.h>
        int *make_buf(void) {
            long n = 10;
            int *p = malloc(n);
            char *q = p;
            return (int *)q;
        }
        """,
        n=45,
        flags="-Wall -Werror",
    )
    return run("make -j1", d)


@scenario("gcc-missing-header", "Build is broken: what is missing?", g_gcc)
def _(d):
    c_project(
        d, '#include "config_generated.h"\nint version(void) { return CONFIG_VERSION; }\n', n=35
    )
    return run("make -j1", d)


@scenario("ld-undefined", "Linking the app fails. Why?", g_ld)
def _(d):
    c_project(d, "int compute(int);\nint run(void) { return compute(3); }\n", n=50)
    return run("make -j1", d)


@scenario("gxx-template", "why doesn't the C++ code compile", g_gcc)
def _(d):
    write(
        d,
        {
            "main.cpp": """
        #include <map>
        #include <string>
        #include <vector>
        #include <algorithm>
        struct Item { std::string name; int qty; };
        int main() {
            std::map<std::string, Item> stock;
            std::vector<Item> v;
            std::sort(stock.begin(), stock.end(), [](auto &a, auto &b) { return a.second.qty < b.second.qty; });
            return 0;
        }
        """
        },
    )
    return run("g++ -std=c++17 -c main.cpp -o main.o", d)


@scenario("c-assert", "The program aborts when run, where?", g_line(r"Assertion .* failed"))
def _(d):
    write(
        d,
        {
            "main.c": """
        #include <assert.h>
        #include <stdio.h>
        int main(void) {
            int stock = 60;
            for (int day = 1; day <= 300; day++) {
                fprintf(stderr, "day %d: stock %d\\n", day, stock);
                stock += (day % 4 == 0) ? 2 : -1;
                assert(stock >= 0 && "stock went negative");
            }
            return 0;
        }
        """,
            "Makefile": "run: app\n\t./app\napp: main.c\n\t$(CC) -o app main.c\n",
        },
    )
    return run("make run", d)


def cargo_project(d: Path, lib: str, n: int = 30) -> None:
    mods = "\n".join(f"pub mod m{i};" for i in range(n))
    files = {
        "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
        "src/lib.rs": mods + "\n" + lib,
    }
    for i in range(n):
        files[f"src/m{i}.rs"] = (
            f"pub fn f{i}(x: i32) -> i32 {{\n    let unused_{i} = x;\n    x + {i}\n}}\n"
        )
    write(d, files)


@scenario("cargo-mismatch", "Why does cargo build fail?", g_rustc)
def _(d):
    cargo_project(
        d,
        """
        pub fn parse_port(s: &str) -> u16 {
            let n: u16 = s.trim();
            n
        }
        """,
    )
    return run("cargo build --offline", d)


@scenario("cargo-borrow", "What does the borrow checker complain about?", g_rustc)
def _(d):
    cargo_project(
        d,
        """
        pub fn dedup(v: &mut Vec<i32>) {
            let first = &v[0];
            v.push(*first + 1);
            v.retain(|x| x != first);
        }
        """,
        n=25,
    )
    return run("cargo build --offline", d)


@scenario("cargo-import", "cargo check fails on an import; which one?", g_rustc)
def _(d):
    cargo_project(
        d,
        """
        use std::collections::HashMapp;
        pub fn count(words: &[&str]) -> usize {
            let mut m = HashMapp::new();
            for w in words { *m.entry(w).or_insert(0) += 1; }
            m.len()
        }
        """,
        n=35,
    )
    return run("cargo check --offline", d)


@scenario("cargo-test-panic", "Which Rust test fails and why?", g_cargo_test)
def _(d):
    tests = "\n".join(
        f"    #[test]\n    fn works_{i}() {{ assert_eq!(super::m{i % 20}::f{i % 20}(1), 1 + {i % 20}); }}"
        for i in range(60)
    )
    cargo_project(
        d,
        f"""
        pub fn mean(v: &[f64]) -> f64 {{ v.iter().sum::<f64>() / v.len() as f64 }}
        #[cfg(test)]
        mod tests {{
        {tests}
            #[test]
            fn mean_of_three() {{ assert_eq!(super::mean(&[1.0, 2.0, 4.0]), 2.0); }}
        }}
        """,
        n=20,
    )
    return run("cargo test --offline", d)


@scenario("node-typeerror", "Why does the node script crash?", g_stack)
def _(d):
    write(
        d,
        {
            "app.js": """
        const orders = [];
        for (let i = 0; i < 200; i++) orders.push({ id: i, customer: i % 17 === 16 ? null : { name: 'c' + i } });
        for (const o of orders) {
          console.log(`order ${o.id} for ${o.customer.name}`);
        }
        """
        },
    )
    return run("node app.js", d)


@scenario("node-test-fail", "which node test fails?", g_tap)
def _(d):
    cases = "\n".join(
        f"test('adds {i}', () => assert.strictEqual(add({i}, 1), {i + 1}));" for i in range(80)
    )
    write(
        d,
        {
            "add.test.js": f"""
        const test = require('node:test');
        const assert = require('node:assert');
        const add = (a, b) => a + b;
        const slug = (s) => s.toLowerCase().replace(/ /g, '-');
        {cases}
        test('slug keeps dashes', () => assert.strictEqual(slug('A  B'), 'a-b'));
        """
        },
    )
    return run("node --test --test-reporter=tap add.test.js", d)


@scenario("npm-build-script", "npm run build fails, what is wrong?", g_stack)
def _(d):
    write(
        d,
        {
            "package.json": '{"name": "site", "version": "1.0.0", "scripts": {"build": "node build.js"}}',
            "build.js": """
        const pages = Array.from({length: 150}, (_, i) => ({ slug: 'page-' + i, title: 'Page ' + i }));
        pages[97].title = undefined;
        for (const p of pages) {
          console.log('rendering ' + p.slug + ' -> dist/' + p.slug + '.html');
          if (p.title.length > 80) console.log('long title');
        }
        """,
        },
    )
    return run("npm run build", d)


@scenario("npm-missing-script", "Why does npm test not run?", g_npm)
def _(d):
    write(
        d,
        {
            "package.json": json.dumps(
                {
                    "name": "lib",
                    "version": "1.0.0",
                    "scripts": {f"task{i}": f"echo {i}" for i in range(5)},
                }
            )
        },
    )
    return run("for i in 0 1 2 3 4; do npm run task$i; done; npm run tests", d)


@scenario("javac-symbol", "Why does javac fail?", g_javac)
def _(d):
    files = {
        f"src/Util{i}.java": f"public class Util{i} {{ public static int f(int x) {{ return x + {i}; }} }}\n"
        for i in range(30)
    }
    files["src/Main.java"] = """
        import java.util.*;
        public class Main {
            public static void main(String[] args) {
                List<String> names = new ArrayList<>();
                names.add("x");
                System.out.println(nmes.size());
            }
        }
        """
    write(d, files)
    return run("javac -Xlint:all -verbose -d out src/*.java", d)


@scenario("java-npe", "The Java program crashes, where and why?", g_stack)
def _(d):
    write(
        d,
        {
            "Main.java": """
        import java.util.*;
        public class Main {
            static Map<String, String> cfg = new HashMap<>();
            static int port() { return Integer.parseInt(cfg.get("port").trim()); }
            public static void main(String[] args) {
                for (int i = 0; i < 150; i++) System.out.println("INFO worker " + i + " started");
                System.out.println("binding on " + port());
            }
        }
        """
        },
    )
    return run("javac Main.java && java Main", d)


@scenario("cmake-missing-package", "cmake configure fails, why?", g_cmake)
def _(d):
    write(
        d,
        {
            "CMakeLists.txt": """
        cmake_minimum_required(VERSION 3.16)
        project(demo C)
        find_package(ZeroMQFancy 4.3 REQUIRED)
        add_executable(demo main.c)
        """,
            "main.c": "int main(void){return 0;}\n",
        },
    )
    return run("cmake -S . -B build --log-level=VERBOSE", d)


@scenario("bash-set-e", "the deploy script stops early, why?", g_line(r"cannot stat"))
def _(d):
    write(
        d,
        {
            "deploy.sh": """
        set -e
        for i in $(seq 1 120); do echo "[deploy] uploading asset $i/120 ok"; done
        mkdir -p out
        cp config/production.yml out/
        echo "[deploy] done"
        """
        },
    )
    return run("bash -x deploy.sh", d)


@scenario("py-import-collect", "pytest errors during collection, what is wrong?", g_collect)
def _(d):
    pytest_suite(
        d,
        """
        from app.core import parse_configuration

        def test_it():
            assert parse_configuration("{}") == {}
        """,
        modules=7,
    )
    return run(
        f"{PY} -m pytest -v -p no:cacheprovider --tb=native --continue-on-collection-errors tests",
        d,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("logs.jsonl")))
    ap.add_argument("--only", help="run one scenario and print its output and gold")
    args = ap.parse_args()
    cases = []
    for k, (name, question, rule, build) in enumerate(SCENARIOS):
        if args.only and name != args.only:
            continue
        d = Path(tempfile.mkdtemp(prefix="jeeves-logs-"))
        try:
            text = build(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        lines = text.split("\n")
        a, b = rule(lines)
        if args.only:
            for i, x in enumerate(lines):
                print(f"{i + 1:5d}{'*' if a <= i <= b else ' '} {x}")
        cases.append(
            {
                "id": f"l{k:03d}",
                "source": name,
                "question": question,
                "source_type": "logs",
                "text": text,
                "gold": [a + 1, b + 1],
            }
        )
        print(f"{name}: {len(lines)} lines, gold {a + 1}-{b + 1}", file=sys.stderr)
    if not args.only:
        with open(args.out, "w") as f:
            for c in cases:
                f.write(json.dumps(c) + "\n")
        print(f"{len(cases)} cases -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
