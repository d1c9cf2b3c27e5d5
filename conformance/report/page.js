// The matrix page's behaviour (conformance.report.page): filters, sorting, a cell's detail. Loads nothing.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("data").textContent);
  const table = document.getElementById("matrix");
  const tbody = table.tBodies[0];
  const FIXED = 3; // class, model_type, modalities come before the cells
  const NEW = ["fail", "error", "timeout", "xpass"];
  const NOT_PASSING = ["fail", "xfail", "error", "timeout"];
  const RANK = { fail: 0, error: 1, timeout: 2, xpass: 3, xfail: 4, skip: 5, pass: 6 };
  const columns = []; // [run, check index] of each cell column, left to right
  data.runs.forEach((run, r) => run.checks.forEach((check, c) => columns.push([r, c])));
  const checkHeaders = Array.from(table.querySelectorAll("thead th.check"));
  const rows = Array.from(tbody.rows);
  rows.forEach((tr, i) => { tr.dataset.i = i; });
  const byId = (id) => document.getElementById(id);

  function cellAt(tr, column) {
    const [r, c] = columns[column];
    return data.cells[data.names[tr.dataset.i]][r][c] || null;
  }

  function matches(verdict, wanted) {
    if (wanted === "new") return NEW.includes(verdict);
    if (wanted === "notpass") return NOT_PASSING.includes(verdict);
    return verdict === wanted;
  }

  // -- filters: a row shows when it matches every filter; the check filter also hides the other columns

  function apply() {
    const text = byId("f-text").value.trim().toLowerCase();
    const check = byId("f-check").value, verdict = byId("f-verdict").value;
    const modality = byId("f-modality").value, family = byId("f-family").value;
    const visible = columns.map(([r, c]) => !check || data.runs[r].checks[c] === check);
    checkHeaders.forEach((th, i) => { th.hidden = !visible[i]; });
    table.querySelectorAll("thead th.run").forEach((th) => {
      const count = columns.filter(([r], i) => r === Number(th.dataset.run) && visible[i]).length;
      th.colSpan = Math.max(count, 1);
      th.hidden = count === 0;
    });
    let shown = 0;
    for (const tr of rows) {
      const name = data.names[tr.dataset.i].toLowerCase(), fam = tr.dataset.family;
      let show = (!text || name.includes(text) || fam.toLowerCase().includes(text)) &&
        (!family || fam === family) && (!modality || tr.dataset.modalities.split(" ").includes(modality));
      let any = !verdict;
      for (let i = 0; i < columns.length; i++) {
        tr.cells[FIXED + i].hidden = !visible[i];
        const cell = visible[i] && verdict && !any ? cellAt(tr, i) : null;
        if (cell && matches(cell[0], verdict)) any = true;
      }
      show = show && any;
      tr.hidden = !show;
      if (show) shown++;
    }
    byId("shown").textContent = shown + " of " + rows.length + " classes";
    measure();
  }

  for (const id of ["f-check", "f-verdict", "f-modality", "f-family"]) byId(id).addEventListener("change", apply);
  byId("f-text").addEventListener("input", apply);

  // -- sorting: by a header; a check column sorts by how bad its verdict is

  let sortKey = null, direction = 1;
  function sortValue(tr, key) {
    if (key === "name") return data.names[tr.dataset.i];
    if (key === "family" || key === "modalities") return tr.dataset[key];
    const cell = cellAt(tr, key);
    return cell ? RANK[cell[0]] : 7;
  }
  table.tHead.addEventListener("click", (event) => {
    const th = event.target.closest("th[data-key]");
    if (!th) return;
    const key = th.dataset.key === "col" ? checkHeaders.indexOf(th) : th.dataset.key;
    direction = sortKey === key ? -direction : 1;
    sortKey = key;
    table.querySelectorAll("thead th[data-sorted]").forEach((h) => h.removeAttribute("data-sorted"));
    th.dataset.sorted = direction > 0 ? "asc" : "desc";
    const sorted = rows.slice().sort((a, b) => {
      const x = sortValue(a, key), y = sortValue(b, key);
      return (x < y ? -1 : x > y ? 1 : 0) * direction || a.dataset.i - b.dataset.i;
    });
    tbody.append(...sorted);
  });

  // -- a cell's detail: verdict, reason, metrics, the command that reruns it

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function withLinks(node, text) { // text stays text; only its http(s) URLs become links
    const url = /https?:\/\/[^\s<>"'()\[\]]+/g;
    let last = 0, found;
    while ((found = url.exec(text)) !== null) {
      node.append(text.slice(last, found.index));
      const a = el("a", found[0]);
      a.href = found[0];
      a.rel = "noopener noreferrer";
      node.append(a);
      last = found.index + found[0].length;
    }
    node.append(text.slice(last));
    return node;
  }

  let selected = null;
  function show(td) {
    const column = td.cellIndex - FIXED, tr = td.parentElement;
    if (column < 0) return;
    const [r, c] = columns[column], run = data.runs[r], check = run.checks[c];
    const name = data.names[tr.dataset.i], cell = cellAt(tr, column);
    const body = byId("detail-body");
    body.replaceChildren(el("h3", name + " / " + check));
    if (data.runs.length > 1) body.append(el("p", run.label, "run"));
    if (!cell) {
      body.append(el("p", "not run", "verdict"));
    } else {
      const [verdict, reason, seconds, metrics, expected] = cell;
      const [symbol, meaning] = data.meanings[verdict === "xfail" && expected === "error" ? "kerr" : verdict];
      body.append(el("p", symbol + " " + verdict + ": " + meaning, "verdict " + verdict));
      if (expected) body.append(el("p", "listed in fixtures/expectations as: " + expected));
      if (reason >= 0) body.append(el("h4", "reason"), withLinks(el("p", null, "reason"), data.reasons[reason]));
      const list = el("table", null, "metrics");
      for (const key of Object.keys(metrics).sort()) {
        const row = list.insertRow();
        row.insertCell().textContent = key;
        const value = metrics[key];
        row.insertCell().textContent = typeof value === "object" ? JSON.stringify(value) : String(value);
      }
      const row = list.insertRow();
      row.insertCell().textContent = "seconds";
      row.insertCell().textContent = String(seconds);
      body.append(el("h4", "metrics"), list);
    }
    const command = run.reproducers[check].split("{model}").join(name);
    const pre = el("pre");
    pre.append(el("code", command));
    const copy = el("button", "copy");
    copy.type = "button";
    copy.addEventListener("click", () => copyText(pre, command, copy));
    body.append(el("h4", "rerun this cell"), pre, copy);
    if (selected) selected.classList.remove("selected");
    selected = td;
    td.classList.add("selected");
    byId("detail").hidden = false;
  }

  function copyText(pre, text, button) {
    const selectIt = () => {
      const range = document.createRange();
      range.selectNodeContents(pre);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = "selected: press Ctrl+C";
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(() => { button.textContent = "copied"; }, selectIt);
    } else {
      selectIt();
    }
  }

  function hide() {
    byId("detail").hidden = true;
    if (selected) selected.classList.remove("selected");
    selected = null;
  }

  tbody.addEventListener("click", (event) => {
    const td = event.target.closest("td.v");
    if (td) show(td);
  });
  tbody.addEventListener("keydown", (event) => {
    const td = event.target.closest("td.v");
    if (td && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); show(td); }
  });
  tbody.addEventListener("mouseover", (event) => { // the reason on hover, written when first needed
    const td = event.target.closest("td.v");
    if (!td || td.title) return;
    const cell = cellAt(td.parentElement, td.cellIndex - FIXED);
    td.title = cell ? cell[0] + (cell[1] >= 0 ? ": " + data.reasons[cell[1]].slice(0, 300) : "") : "not run";
  });
  byId("detail-close").addEventListener("click", hide);
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") hide(); });

  // -- the second header row sticks below the first

  function measure() {
    const runs = table.querySelector("thead tr.runs");
    table.style.setProperty("--runs-height", runs ? runs.getBoundingClientRect().height + "px" : "0px");
  }
  window.addEventListener("resize", measure);
  measure();
})();
