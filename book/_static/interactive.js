/* Attention, executable: figures a reader can move, without a kernel.
 *
 * A chapter's code computes every state of a figure with the package and prints it as JSON
 * inside <div class="ab-interactive"> (attention_book._interactive); the same cell draws the
 * figure's default state with matplotlib, the still image that a reader without JavaScript,
 * and the PDF, see. This script replaces that image by a drawing with its controls: it only
 * draws the numbers it is given (the one computation it does is picking a frame).
 *
 * Data: {controls: [{name, label, options: [...], kind: "select" | "range"}], default: [i, ...],
 *        panels: [{kind: "bars" | "heatmap" | "readout", ...}], frames: {"i,j": [panel data]}}.
 * Every drawn number carries data-value, so that tests can compare the page with the data.
 */
(() => {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  // The figures' words in the Chinese edition (the glossary's terms).
  const ZH = {
    "running sum ℓ̄": "累积和 ℓ̄", "factor on the old sum": "旧和的缩放因子",
    "weights so far": "目前的权重",
    "query": "查询", "key": "键", "keys": "键", "value": "值", "weight": "权重",
    "weights": "权重", "score": "分数", "scores": "分数", "layer": "层", "head": "头",
    "token": "token", "step": "步", "block": "块", "scaled": "缩放", "unscaled": "不缩放",
    "scale": "缩放", "fill value": "填充值", "mask": "掩码", "dtype": "数据类型",
    "running maximum m": "累积最大值 m", "running sum ℓ": "累积和 ℓ", "output": "输出",
    "entry": "元素", "size d_k": "维度 d_k", "spread of the scores": "分数的离散程度",
    "largest weight": "最大权重", "weight on the first token": "第一个 token 上的权重",
    "attends to": "关注", "blocks read": "已读的块", "row": "行", "position": "位置",
    "legs": "腿", "wheels": "轮子", "an animal?": "动物？", "a vehicle?": "交通工具？",
    "anything?": "随便什么？", "row 1": "第 1 行", "row 2": "第 2 行", "row 3": "第 3 行",
    "spread of the raw scores": "未缩放分数的离散程度",
    "spread of the scaled scores": "缩放后分数的离散程度",
    "largest weight, unscaled": "最大权重（不缩放）", "largest weight, scaled": "最大权重（缩放）",
    "mask written as": "掩码的写法", "softmax": "用哪个 softmax", "the package": "该包",
    "plain torch.softmax": "普通的 torch.softmax", "bool, True = may attend": "布尔，True = 允许关注",
    "additive, −∞": "加性，−∞", "additive, −1e9": "加性，−1e9",
    "additive, finfo.min (BERT)": "加性，finfo.min（BERT）", "query 0, with no key": "没有键的查询 0",
    "zeros": "全为零", "uniform": "均匀", "mixed": "不均匀", "0 (padding)": "0（填充）",
    "'it' attends most to": "“it”关注最多的是", "with the weight": "权重为",
  };
  const zh = () => (document.documentElement.lang || "").toLowerCase().startsWith("zh");
  const say = (text) => (zh() && Object.prototype.hasOwnProperty.call(ZH, text) ? ZH[text] : text);

  function element(name, attributes = {}, parent = null, svg = true) {
    const node = svg ? document.createElementNS(SVG, name) : document.createElement(name);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }

  // Viridis at 9 stops, interpolated: the colour map of the book's still heatmaps.
  const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
                   [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
  function colour(t) {
    const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    const f = x - i;
    const rgb = VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
    return { fill: `rgb(${rgb.join(",")})`, dark: whiteContrasts(rgb) };
  }
  // WCAG 2.1's relative luminance and contrast ratio: a number on a cell is drawn in white or
  // black, whichever contrasts more with the cell (at least 4.6:1 over the whole colour map).
  function luminance(rgb) {
    const [r, g, b] = rgb.map((c) => { const s = c / 255; return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }
  const whiteContrasts = (rgb) => 1.05 / (luminance(rgb) + 0.05) > (luminance(rgb) + 0.05) / 0.05;
  const shown = (v) => (typeof v === "number" ? (Math.abs(v) < 0.005 && v !== 0 ? v.toExponential(0) : v.toFixed(2)) : String(v));

  function bars(panel, data, parent) {
    const n = panel.labels.length, width = Math.max(320, 46 * n), height = 210;
    // Its text alternative: what is drawn, value by value ("weight: cat 0.50, dog 0.25, ...").
    const described = data.values.map((values, s) => (panel.series ? `${say(panel.series[s])}: ` : "") +
      values.map((v, i) => `${panel.labels[i]} ${shown(v)}`).join(", ")).join("; ");
    const svg = element("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "ab-panel ab-bars",
                                 "aria-label": `${say(panel.y_label || "")}: ${described}` }, parent);
    const top = 18, bottom = height - 42, left = 34, slot = (width - left - 6) / n;
    const max = panel.y_max || Math.max(1e-12, ...data.values.flat().filter(Number.isFinite));
    element("line", { x1: left, y1: bottom, x2: width - 4, y2: bottom, class: "ab-axis" }, svg);
    const series = data.values.length;
    data.values.forEach((values, s) => values.forEach((v, i) => {
      const h = Number.isFinite(v) ? (bottom - top) * Math.max(v, 0) / max : 0;
      const w = (slot * 0.8) / series, x = left + i * slot + slot * 0.1 + s * w;
      const bar = element("rect", { x, y: bottom - h, width: Math.max(w - 1, 1), height: h,
                                    class: `ab-bar ab-series-${s}` + ((data.highlight || []).includes(i) ? " ab-highlight" : ""),
                                    "data-value": v }, svg);
      element("title", {}, bar).textContent = `${panel.labels[i]}: ${shown(v)}`;
      if (series === 1) element("text", { x: x + w / 2, y: bottom - h - 4, class: "ab-value" }, svg).textContent = shown(v);
    }));
    panel.labels.forEach((label, i) => {
      element("text", { x: left + (i + 0.5) * slot, y: bottom + 14, class: "ab-tick" }, svg).textContent = label;
    });
    element("text", { x: width / 2, y: height - 6, class: "ab-axis-label" }, svg).textContent = say(panel.x_label || "");
    element("text", { x: 4, y: 12, class: "ab-axis-label ab-start" }, svg).textContent = say(panel.y_label || "");
    if (panel.series) panel.series.forEach((name, s) => {
      const x = width - 150, y = 12 + 14 * s;
      element("rect", { x, y: y - 9, width: 10, height: 10, class: `ab-bar ab-series-${s}` }, svg);
      element("text", { x: x + 14, y, class: "ab-axis-label ab-start" }, svg).textContent = say(name);
    });
  }

  function heatmap(panel, data, parent) {
    const rows = panel.rows.length, cols = panel.cols.length, cell = Math.min(46, 420 / Math.max(cols, 1));
    const left = 78, top = 60, width = left + cols * cell + 8, height = top + rows * cell + 26;
    // A group of rows, each a picture named by its numbers: a reader tabs from row to row.
    const svg = element("svg", { viewBox: `0 0 ${width} ${height}`, role: "group", class: "ab-panel ab-heatmap",
                                 "aria-label": `${say(panel.row_label)} × ${say(panel.col_label)}` }, parent);
    const lo = panel.vmin ?? 0, hi = panel.vmax ?? 1;
    panel.cols.forEach((label, j) => {
      const t = element("text", { x: left + (j + 0.5) * cell, y: top - 6, class: "ab-tick ab-slanted",
                                  transform: `rotate(-45 ${left + (j + 0.5) * cell} ${top - 6})` }, svg);
      t.textContent = label;
    });
    data.matrix.forEach((row, i) => {
      const named = `${say(panel.row_label)} ${panel.rows[i]}: ` +
        row.map((v, j) => `${panel.cols[j]} ${shown(v)}`).join(", ");
      const group = element("g", { class: "ab-row", tabindex: 0, "data-row": i, role: "img",
                                   "aria-label": named }, svg);
      element("text", { x: left - 6, y: top + (i + 0.6) * cell, class: "ab-tick ab-end" }, group).textContent = panel.rows[i];
      row.forEach((v, j) => {
        const finite = typeof v === "number";
        const { fill, dark } = finite ? colour((v - lo) / (hi - lo)) : { fill: "#d9d9d9", dark: false };
        const rect = element("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
                                       fill, class: "ab-cell", "data-value": finite ? v : String(v) }, group);
        element("title", {}, rect).textContent = `${panel.rows[i]} → ${panel.cols[j]}: ${shown(v)}`;
        if (cell >= 26) element("text", { x: left + (j + 0.5) * cell, y: top + (i + 0.62) * cell,
                                          class: `ab-cell-text ${dark ? "ab-on-dark" : "ab-on-light"}` }, group).textContent = shown(v);
      });
    });
    element("text", { x: left + cols * cell / 2, y: height - 6, class: "ab-axis-label" }, svg).textContent = say(panel.col_label);
    element("text", { x: 4, y: 12, class: "ab-axis-label ab-start" }, svg).textContent = say(panel.row_label);
  }

  function readout(panel, data, parent) {
    const list = element("dl", { class: "ab-panel ab-readout" }, parent, false);
    panel.items.forEach((item, k) => {
      element("dt", {}, list, false).textContent = say(item);
      const dd = element("dd", { "data-value": data.values[k] }, list, false);
      dd.textContent = shown(data.values[k]);
    });
  }

  const DRAW = { bars, heatmap, readout };

  function build(holder) {
    const spec = JSON.parse(holder.querySelector("script[type='application/json']").textContent);
    // The still image: in the holder's cell, or in the next cell, which draws it with a caption.
    const cell = holder.closest(".cell") || holder.parentElement;
    let next = cell.nextElementSibling;
    while (next && !next.classList.contains("cell")) next = next.nextElementSibling;
    const still = cell.querySelector(".cell_output img") || (next && next.querySelector(".cell_output img"));
    const figure = element("div", { class: "ab-figure", role: "group" }, null, false);
    // Named by the caption of the figure it replaces, when there is one.
    const caption = still && still.closest("figure") && still.closest("figure").querySelector("figcaption");
    if (caption) {
      caption.id = caption.id || `ab-caption-${Math.random().toString(36).slice(2)}`;
      figure.setAttribute("aria-labelledby", caption.id);
    } else {
      figure.setAttribute("aria-label", say(spec.controls.map((control) => control.label).join(", ")));
    }
    const controls = element("div", { class: "ab-controls" }, figure, false);
    const canvas = element("div", { class: "ab-canvas" }, figure, false);
    // What a screen reader hears when a control moves: the state in a few words, not the drawing.
    const status = element("p", { class: "ab-status", "aria-live": "polite" }, figure, false);
    const state = [...spec.default];
    const draw = () => {
      canvas.replaceChildren();
      const frame = spec.frames[state.join(",")];
      spec.panels.forEach((panel, k) => DRAW[panel.kind](panel, frame[k], canvas));
      figure.dataset.state = state.join(",");
      status.textContent = spec.controls.map((control, c) =>
        `${say(control.label)}: ${say(String(control.options[state[c]]))}`).join("; ");
    };
    spec.controls.forEach((control, c) => {
      const id = `ab-${Math.random().toString(36).slice(2)}`;
      const label = element("label", { for: id }, controls, false);
      label.textContent = say(control.label);
      let input;
      if (control.kind === "range") {
        input = element("input", { id, type: "range", min: 0, max: control.options.length - 1, step: 1,
                                   value: state[c], "data-control": control.name }, controls, false);
        const out = element("output", { for: id }, controls, false);
        const show = () => {  // the value, not the slider's position, is what a reader hears
          out.textContent = String(control.options[state[c]]);
          input.setAttribute("aria-valuetext", out.textContent);
        };
        input.addEventListener("input", () => { state[c] = Number(input.value); show(); draw(); });
        show();
      } else {
        input = element("select", { id, "data-control": control.name }, controls, false);
        control.options.forEach((option, o) => {
          const item = element("option", { value: o }, input, false);
          item.textContent = say(String(option));
        });
        input.value = String(state[c]);
        input.addEventListener("change", () => { state[c] = Number(input.value); draw(); });
      }
    });
    draw();
    if (still) {
      still.parentElement.insertBefore(figure, still);
      still.hidden = true;
    } else {
      holder.parentElement.insertBefore(figure, holder);
    }
    figure.dataset.ready = "true";
  }

  function start() {
    document.querySelectorAll(".ab-interactive").forEach((holder) => {
      try { build(holder); } catch (error) { console.error("interactive figure:", error); }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
