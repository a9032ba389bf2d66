"""The Chinese edition's style, as a native reader's copy-edit left it (issue 21).

Each catalog of locales/zh_CN/LC_MESSAGES is checked on its own, on the text of its
translations (`msgstr`) only, with inline math, inline code and reference targets taken out:

- a {ref} to a *section* label carries an explicit title ({ref}`“掩码”一节 <sec-x>`): a bare
  one drops the section's title, unquoted, into the Chinese sentence. The section labels are
  read from the English sources (a `(label)=` right above a `##` heading or deeper; the labels
  of chapter and page titles, `#`, may stay bare);
- no retired form of a term the glossary (book/glossary.md, locales/.../glossary.po) fixes.

And every display formula of the English sources (`$$ ... $$`, ```{math} blocks) holds no
English word in a `\\text{...}`: math is shared by both editions and cannot be translated.
Symbol names in a subscript or superscript that book/notation.md uses (`d_\\text{model}`,
`h_\\text{kv}`, `M^\\text{bool}`) are not words.

The checker is tested on bad and good strings first, so that each check is known to fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
LOCALES = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"
CATALOGS = sorted(LOCALES.rglob("*.po"))
SOURCES = sorted((ROOT / "book").rglob("*.md"))


# --- the English sources: section labels, notation's symbol names ---------------------------
_LABEL = re.compile(r"^\(([\w.:-]+)\)=[ \t]*\n(?:[ \t]*\n)*(#+)[ \t]", re.M)


def section_labels(sources: list[Path] = SOURCES) -> set[str]:
    """The labels right above a section heading (`##` or deeper), not a chapter's or page's `#`."""
    return {label for path in sources for label, hashes in _LABEL.findall(path.read_text())
            if len(hashes) >= 2}


_SCRIPT_TEXT = re.compile(r"[_^]\{?\\text\{([^{}]*)\}")


def notation_names() -> set[str]:
    """The names that book/notation.md writes as a sub- or superscript: d_\\text{model} -> model."""
    return set(_SCRIPT_TEXT.findall((ROOT / "book" / "notation.md").read_text()))


# --- the prose of a translation ------------------------------------------------------------
_ROLE = re.compile(r"\{[\w:.+-]+\}`([^`]*)`|:[\w:.+-]+:`([^`]*)`")
_TARGET = re.compile(r"^(.*?)\s*<[^<>]+>\s*$", re.S)
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$([^$\n]+?)\$", re.S)
_CODE = re.compile(r"``(.+?)``|`([^`]+)`")
_LINK = re.compile(r"\]\([^)\s]*\)")
# A width of notation.md (d, d_k, d_v, d_q, d_h, d_\text{model}, h d_k, d_k = 4, ...), not a shape
# such as (T, d_k): the math that a word for "dimension" may sit next to. Math is replaced by
# WIDTH or OTHER in the prose.
_WIDTH_MATH = re.compile(r"(?<![A-Za-z\\])d(?![A-Za-z])")
WIDTH, OTHER = "⟦d⟧", "⟦m⟧"


def prose(text: str) -> str:
    """`text` without its markup: a role keeps its explicit title, math and code become marks."""
    def role(match: re.Match) -> str:
        content = match[1] if match[1] is not None else match[2]
        titled = _TARGET.match(content)
        return titled[1] if titled else " "

    def math(match: re.Match) -> str:
        body = match[1] if match[1] is not None else match[2]
        shape = body.lstrip().startswith("(") or "," in body
        return WIDTH if _WIDTH_MATH.search(body) and not shape else OTHER

    text = _ROLE.sub(role, text)
    text = _MATH.sub(math, text)
    text = _CODE.sub(" ", text)
    return _LINK.sub("]", text)


# --- the retired forms ---------------------------------------------------------------------
# Words for "dimension". The glossary's term for the size of a vector or of a space (d_k, d_v,
# d_model, a head's size, a hidden layer's size) is 维度. The other words have other, legitimate
# uses, so each is refused only where it names such a dimension:
#   宽度 is refused everywhere except after the few owners that have a real width (a figure, a
#     window, a column, a histogram or distribution);
#   尺寸 ("the size" of a problem, of a benchmark, of a model's configuration) and 维数 (the
#     number of dimensions of a tensor, `x.ndim`: "x 的维数少于 2") are refused only after a
#     vector's owner (模型, 头, 向量, 查询, 键, 值, 嵌入, 隐藏层, 切片, 特征) or next to a width
#     symbol (尺寸为 $d_k$, $d_k$ 的维数);
#   大小 (批量大小 N, 块大小, a tensor's size) is refused only right before a width symbol
#     (大小为 $d_v = 3$, 隐藏层大小 $d_\text{model}$).
_OWNER = r"(?:模型|头|向量|查询|键|值|嵌入|隐藏层|切片|特征)"
_WIDTH_ALLOWED_AFTER = re.compile(r"(?:图|图片|图像|窗口|列|像素|页面|屏幕|直方图|分布|曲线)的?$")
_DIMENSION = [
    re.compile(_OWNER + r"的?(?:尺寸|维数)"),
    re.compile(r"(?:尺寸|维数|宽度|大小)\s*(?:为|是|等于)?\s*[（(]?\s*" + re.escape(WIDTH)),
    re.compile(re.escape(WIDTH) + r"\s*[）)]?\s*的?\s*(?:尺寸|维数|宽度)"),
]

# (name, pattern, what to write instead). Each pattern matches the retired form only.
RETIRED: list[tuple[str, re.Pattern, str]] = [
    # "本书包含" (the book contains) is not the package.
    ("本书的包", re.compile(r"本书的?包(?![含括])"),
     "name the package attention_book at its first mention on a page, then 该包"),
    ("被掩盖", re.compile(r"被掩盖"), "被掩码的 / 掩码掉 (glossary: mask)"),
    # The book never covers anything but masked keys; the notes' own word, 遮蔽, may be quoted.
    ("遮住", re.compile(r"遮(?:不)?住"), "被掩码的 / 掩码掉 (glossary: mask)"),
    ("批次", re.compile(r"批次"), "批量 (glossary: batch size)"),
    ("最高水位", re.compile(r"最高水位|高水位(?!线)"), "高水位线 (glossary: peak memory)"),
    ("缩放系数", re.compile(r"缩放系数"), "缩放因子 (glossary: scaling)"),
    ("列印", re.compile(r"列印"), "打印"),
    ("平方误差来打分", re.compile(r"平方误差[^。；]{0,4}打分"),
     "a loss is not a score (分数): 用平方误差作为损失"),
    ("蒙特卡罗", re.compile(r"蒙特卡罗"), "蒙特卡洛 (glossary: Monte Carlo)"),
]
_ONE_HOT = re.compile(r"one[\s-]?hot", re.I)
# The glossary's heading and a first mention may give the English term after the Chinese one.
_ONE_HOT_GLOSSED = re.compile(r"独热[\u4e00-\u9fff]{0,3}（one-hot[^）]*）")


def style_problems(msgstr: str, sections: set[str]) -> list[str]:
    """What is wrong with one translation: a list of short descriptions (empty when all is well)."""
    problems = []
    for match in re.finditer(r"(?:\{ref\}|:ref:)`([^`<>]*)`", msgstr):  # MyST, or a docstring's
        if match[1].strip() in sections:
            problems.append(f"bare section reference {match[0]}: give it a title, "
                            f"{{ref}}`“<节的标题>”一节 <{match[1].strip()}>`")
    text = prose(msgstr)
    for name, pattern, instead in RETIRED:
        for match in pattern.finditer(text):
            problems.append(f"{name}: …{_around(text, match)}… ({instead})")
    for match in _ONE_HOT.finditer(_ONE_HOT_GLOSSED.sub("", text)):
        problems.append(f"bare one-hot: …{_around(text, match)}… (独热, 独热向量)")
    for match in re.finditer("宽度", text):
        if not _WIDTH_ALLOWED_AFTER.search(text[max(0, match.start() - 4):match.start()]):
            problems.append(f"宽度 for a dimension: …{_around(text, match)}… (维度)")
    for pattern in _DIMENSION:
        for match in pattern.finditer(text):
            if "宽度" not in match[0]:  # reported above
                problems.append(f"尺寸/维数/大小 for a dimension: …{_around(text, match)}… (维度)")
    return problems


def _around(text: str, match: re.Match, width: int = 12) -> str:
    return text[max(0, match.start() - width):match.end() + width].replace("\n", " ")


# --- the display formulas ------------------------------------------------------------------
_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}.*?^\1[ \t]*$", re.S | re.M)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$|^(`{3,}|:{3,})\{math\}[^\n]*\n(.*?)^\2[ \t]*$", re.S | re.M)
_TEXT = re.compile(r"(_\{?|\^\{?)?\\(?:text|textrm|textit|textbf|textsf|texttt|mbox)\{([^{}]*)\}")
_ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


def formula_problems(markdown: str, names: set[str]) -> list[str]:
    """Each `\\text{...}` holding an English word in a display formula of `markdown`, with its line."""
    text = _FENCE.sub(lambda m: "\n" * m[0].count("\n"), markdown)  # code cells are no formulas
    problems = []
    for formula in _DISPLAY.finditer(text):
        body = formula[1] if formula[1] is not None else formula[3]
        line = text.count("\n", 0, formula.start()) + 1
        for match in _TEXT.finditer(body):
            script, content = match[1], match[2]
            if script and content.strip() in names:
                continue
            if _ENGLISH_WORD.search(content):
                problems.append(f"line {line}: {match[0]}")
    return problems


# --- the checker itself --------------------------------------------------------------------
SECTIONS = {"sec-eff-time", "sec-masked-padding"}

BAD = [
    "（{ref}`sec-eff-time` 一节对它计时）",
    "见 :ref:`sec-masked-padding`",
    "用本书的包检查你的函数",
    "本书包中的 `softmax` 先减去最大值",
    "接近 one-hot 的行",
    "一个 One-hot 向量",
    "被掩盖的分数",
    "只遮住填充",
    "float16 的 finfo.min 根本遮不住一行",
    "凑成一个批次",
    "即它的最高水位",
    "内存的高水位增长了多少",
    "缩放系数 $\\beta$",
    "列印出来",
    "用平方误差来打分",
    "用的是蒙特卡罗方法",
    "每个头的宽度",
    "$d_\\text{model}$ 是模型宽度",
    "宽度不对",
    "头的尺寸（head size）$d_k$",
    "每个头的尺寸为 $d_k = 4$",
    "按 BERT-base 的尺寸（$d_\\text{model} = 768$，$h = 12$）",
    "向量的维数",
    "维数为 $d_\\text{model}$ 的向量",
    "宽度为 $h \\cdot d_k$ 的张量",
    "在大小为 $d_v = 3$ 的值上",
    "隐藏层大小 $d_\\text{model}$",
]
GOOD = [
    "（{ref}`“时间，实话实说”一节 <sec-eff-time>` 对它计时）",
    "见 {ref}`ch-bert`",
    "用 attention_book 包检查你的函数，该包中的 `softmax`",
    "本书包含十一章",
    "独热（one-hot）：只有一个 1",
    "独热向量 `F.one_hot(i, 4)`，即 $\\text{one-hot}$",
    "被掩码的分数；把键掩码掉；笔记把隐藏一个位置叫作遮蔽",
    "这样投影的开销就不会掩盖掩码的开销",
    "凑成一个批量",
    "它的高水位线",
    "缩放因子 $\\beta$",
    "用平方误差作为损失",
    "蒙特卡洛证据",
    "每个头的维度 $d_k$；模型维度 $d_\\text{model}$",
    "缩放之后，三者的离散程度都一样；图的宽度是 8 英寸",
    "尺寸取得小；在尺寸很大时；完整尺寸的基准测试",
    "`x` 的维数少于 2；某个输入的维数少于 2；其他维数一律拒绝",
    "Llama 2 的尺寸",
    "滑动窗口的宽度为 4；窗口宽度",
    "大小为 $(T_q, d_k)$ 的张量；批量大小 $N$；块大小 $\\tau$；$d_k$ 的大小",
]


@pytest.mark.parametrize("text", BAD)
def test_the_checker_finds_each_retired_form(text):
    assert style_problems(text, SECTIONS), f"not caught: {text}"


@pytest.mark.parametrize("text", GOOD)
def test_the_checker_accepts_the_right_forms(text):
    assert style_problems(text, SECTIONS) == []


def test_the_checker_finds_english_words_in_display_formulas():
    names = {"model", "kv", "bool"}
    bad = ("$$\nM_{ij} = 0 \\quad \\text{if key } j \\text{ may be seen}\n$$\n\n"
           "```{math}\n:label: eq-x\n\\underbrace{(N, T)}_{\\text{padding, per key}}\n```\n"
           "$$\\text{KV cache} = 2 N L h_\\text{kv} d_k T \\text{ numbers}$$\n")
    assert len(formula_problems(bad, names)) == 5
    good = ("$$\nd_\\text{model} = h d_k, \\quad M^\\text{bool}, \\quad \\text{(A1)}\n$$\n"
            "Prose with $\\text{base}$ inline, not displayed.\n"
            "```{code-cell} ipython3\nprint('$$ \\\\text{not a formula} $$')\n```\n")
    assert formula_problems(good, names) == []


def test_the_section_labels_are_found():
    sections = section_labels()
    assert {"sec-eff-time", "sec-masked-padding", "notation-masks"} <= sections
    assert not sections & {"ch-bert", "glossary", "notation", "sec-bert-tokens"}


# --- the catalogs and the sources ----------------------------------------------------------
def _catalog_id(path: Path) -> str:
    return path.relative_to(LOCALES).with_suffix("").as_posix()


@pytest.mark.parametrize("catalog", CATALOGS, ids=[_catalog_id(p) for p in CATALOGS])
def test_catalog_keeps_the_chinese_style(catalog):
    sections = section_labels()
    with catalog.open("rb") as file:
        messages = [m for m in read_po(file, locale="zh_CN") if m.id and m.string]
    found = []
    for message in messages:
        for problem in style_problems(message.string, sections):
            msgid = message.id if isinstance(message.id, str) else message.id[0]
            found.append(f"{msgid[:60]!r}: {problem}")
    assert not found, f"{_catalog_id(catalog)}: {len(found)} problems\n" + "\n".join(found)


@pytest.mark.parametrize("source", SOURCES, ids=[p.relative_to(ROOT / "book").with_suffix("").as_posix()
                                                 for p in SOURCES])
def test_display_formulas_hold_no_english_words(source):
    problems = formula_problems(source.read_text(), notation_names())
    assert not problems, (f"{source.relative_to(ROOT)}: English words in display formulas "
                          "(define a symbol in the prose instead)\n" + "\n".join(problems))


def _literal_asterisks(text: str) -> bool:
    """Whether MyST's Markdown (CommonMark and $math$) leaves a * of emphasis unread in text."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    html = MarkdownIt("commonmark").use(dollarmath_plugin).renderInline(text)
    html = re.sub(r"<code>.*?</code>|<span class=\"math inline\">.*?</span>|<eq>.*?</eq>", "", html, flags=re.S)
    plain = re.sub(r"<[^>]+>", "", html)
    return "**" in plain or bool(re.search(r"(?<![\w*\\])\*(?=[^\s*])", plain))


def test_emphasis_closes_next_to_chinese_punctuation():
    """CommonMark closes ** only where it is right-flanking: **笔记中的“+”**只 stays literal
    (punctuation before, a letter after), on the page as in the notebook."""
    assert _literal_asterisks("**笔记中的“+”**只表示") and not _literal_asterisks("**笔记中的“+”号**只表示")
    unread = [f"{po.name}: {message.string[:60]}" for po in CATALOGS
              for message in read_po(po.open("rb"))
              if message.id and message.string and _literal_asterisks(message.string)
              and not _literal_asterisks(message.id)]
    assert not unread, unread
