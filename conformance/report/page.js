// The matrix page's behaviour (conformance.report.page): the first screen's search and deploy table, filters,
// sorting, a cell's detail (with its history across transformers versions), a class's view, the URL fragment that
// opens them. Loads nothing; text from the run file is only ever set with textContent.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("data").textContent);
  const table = document.getElementById("matrix");
  const tbody = table.tBodies[0];
  const FIXED = 3; // class, model_type, modalities come before the cells
  const NEW = ["fail", "error", "timeout", "xpass"];
  const NOT_PASSING = ["fail", "xfail", "error", "timeout"];
  const ANSWERS = ["works", "broken", "nocheck"];
  const FILTERS = { q: "f-text", check: "f-check", verdict: "f-verdict", modality: "f-modality", family: "f-family" };
  // cell = [verdict, reason index, seconds, metrics, expected, answer, mark, cause, {tolerance, worst_ratio, gate}]
  const VERDICT = 0, REASON = 1, SECONDS = 2, METRICS = 3, EXPECTED = 4, ANSWER = 5, MARK = 6, CAUSE = 7, CLOSE = 8;
  const columns = []; // [run, check index] of each cell column, left to right
  data.runs.forEach((run, r) => run.checks.forEach((check, c) => columns.push([r, c])));
  const checkHeaders = Array.from(table.querySelectorAll("thead th.check"));
  const rows = Array.from(tbody.rows);
  rows.forEach((tr, i) => { tr.dataset.i = i; });
  const deploy = document.getElementById("deploy");
  const deployRows = deploy ? Array.from(deploy.tBodies[0].rows) : []; // in data.names' order, as rows
  const squash = (text) => text.toLowerCase().replace(/[^a-z0-9]/g, "");
  const haystacks = data.names.map((name) => {
    const hay = data.search[name] || name.toLowerCase();
    return [hay, squash(hay)];
  });
  const byId = (id) => document.getElementById(id);
  const short = (name) => data.classes[name].short;

  function cellAt(tr, column) {
    const [r, c] = columns[column];
    return data.cells[data.names[tr.dataset.i]][r][c] || null;
  }

  function matches(cell, wanted) {
    if (wanted === "new") return NEW.includes(cell[VERDICT]);
    if (wanted === "notpass") return NOT_PASSING.includes(cell[VERDICT]);
    if (ANSWERS.includes(wanted)) return cell[ANSWER] === wanted;
    return cell[VERDICT] === wanted;
  }

  // -- filters: a row shows when it matches every filter (and is not internal, unless the toggle says so);
  //    the check filter also hides the other columns

  // the search box: every word must be in the row's name, model_type, aliases or checkpoints, as typed or with
  // only its letters and digits (qwen2-vl finds qwen2_vl)
  function found(i, words) {
    const [hay, squashed] = haystacks[i];
    return words.every((word) => hay.includes(word) || (squash(word) && squashed.includes(squash(word))));
  }

  function apply() {
    const words = byId("f-text").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const check = byId("f-check").value, verdict = byId("f-verdict").value;
    const modality = byId("f-modality").value, family = byId("f-family").value, all = byId("f-all").checked;
    const visible = columns.map(([r, c]) => !check || data.runs[r].checks[c] === check);
    checkHeaders.forEach((th, i) => { th.hidden = !visible[i]; });
    table.querySelectorAll("thead th.run").forEach((th) => {
      const count = columns.filter(([r], i) => r === Number(th.dataset.run) && visible[i]).length;
      th.colSpan = Math.max(count, 1);
      th.hidden = count === 0;
    });
    let shown = 0;
    for (const tr of rows) {
      const fam = tr.dataset.family;
      let show = (all || !tr.dataset.internal) && found(Number(tr.dataset.i), words) &&
        (!family || fam === family) && (!modality || tr.dataset.modalities.split(" ").includes(modality));
      let any = !verdict;
      for (let i = 0; i < columns.length; i++) {
        tr.cells[FIXED + i].hidden = !visible[i];
        const cell = visible[i] && verdict && !any ? cellAt(tr, i) : null;
        if (cell && matches(cell, verdict)) any = true;
      }
      show = show && any;
      tr.hidden = !show;
      if (deployRows[tr.dataset.i]) deployRows[tr.dataset.i].hidden = !show;
      if (show) shown++;
    }
    byId("shown").textContent = shown + " of " + rows.length + " classes";
    measure();
  }

  function changed() { apply(); writeHash(); }
  for (const id of ["f-check", "f-verdict", "f-modality", "f-family", "f-all"]) byId(id).addEventListener("change", changed);
  byId("f-text").addEventListener("input", changed);

  // -- sorting: by a header; a check column sorts by how bad its answer is (new failures first)

  const RANK = { "broken new": 0, "broken improved": 1, "broken listed": 2, "nocheck gap": 3, "works improved": 4,
                 "works ": 5, "na ": 6 };
  let sortKey = null, direction = 1;
  function sortValue(tr, key) {
    if (key === "name") return data.names[tr.dataset.i];
    if (key === "family" || key === "modalities") return tr.dataset[key];
    const cell = cellAt(tr, key);
    return cell ? RANK[cell[ANSWER] + " " + cell[MARK]] ?? 7 : 8;
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

  // -- building text: everything from the run file is text (textContent); only http(s) URLs and in-page links

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

  function withCode(node, text) { // `spans` in backticks become <code>, the rest stays text
    text.split("`").forEach((part, i) => node.append(i % 2 ? el("code", part) : part));
    return node;
  }

  function cellLink(name, check, run, label) {
    const a = el("a", label || check);
    a.href = "#" + target(name, check, run);
    a.addEventListener("click", (event) => { event.preventDefault(); openCell(name, check, run); });
    return a;
  }

  function classLink(name) {
    const a = el("a", "what works for " + short(name) + ", and what to do");
    a.href = "#" + target(name);
    a.addEventListener("click", (event) => { event.preventDefault(); openClass(name); });
    return a;
  }

  // -- a cell's detail: the answer, the column, closeness, root cause, reason, metrics, the command that reruns it

  let selected = null, opened = null; // opened: [name] or [name, check, run]

  function answerLine(cell) {
    const [symbol, meaning] = data.answers[cell[ANSWER]];
    const [glyph, mark] = cell[MARK] ? data.marks[cell[MARK]] : ["", ""];
    return (symbol ? symbol + glyph + " " : "") + meaning + (mark ? " — " + mark : "");
  }

  function closeness(cell) {
    const values = Object.assign({}, cell[METRICS], cell[CLOSE] || {});
    const bounds = ["tolerance", "atol", "rtol"].filter((key) => values[key] !== undefined);
    if (values.worst_ratio === undefined && !bounds.length) return null;
    const parts = [];
    if (values.worst_ratio !== undefined) {
      const ratio = Number(values.worst_ratio);
      parts.push("worst difference " + ratio.toPrecision(3) + " × the allowed one (1.0 = at the edge): " +
        (ratio <= 1 ? "within" : "beyond") + " the tolerance");
    }
    if (values.tolerance !== undefined) parts.push("tolerance " + JSON.stringify(values.tolerance));
    if (values.atol !== undefined || values.rtol !== undefined) {
      const small = (x) => (typeof x === "number" && x !== 0 && Math.abs(x) < 1e-3 ? x.toExponential() : String(x));
      parts.push("allowed |difference| <= " + [values.atol !== undefined ? "atol " + small(values.atol) : "",
        values.rtol !== undefined ? "rtol " + small(values.rtol) + " × |expected|" : ""].filter(Boolean).join(" + "));
    }
    return el("p", parts.join("; "), "closeness");
  }

  function show(td) {
    const column = td.cellIndex - FIXED, tr = td.parentElement;
    if (column < 0) return;
    const [r, c] = columns[column];
    showCell(data.names[tr.dataset.i], r, c, td);
  }

  function showCell(name, r, c, td) {
    const run = data.runs[r], check = run.checks[c], cell = data.cells[name][r][c] || null;
    const body = byId("detail-body");
    body.replaceChildren(el("h3", name + " / " + check));
    if (data.runs.length > 1) body.append(el("p", run.label, "run"));
    if (run.descriptions[check]) body.append(el("p", run.descriptions[check], "desc"));
    if (!cell) {
      body.append(el("p", data.answers.notrun[1], "verdict a-notrun"), ...historyNodes(name, check));
    } else {
      const [verdict, reason, seconds, metrics, expected] = cell;
      body.append(el("p", answerLine(cell), "verdict a-" + cell[ANSWER] + (cell[MARK] ? " m-" + cell[MARK] : "")));
      const said = verdict === "error" || verdict === "timeout" ? ": " + data.meanings[verdict][1] : "";
      body.append(el("p", "verdict " + verdict + said +
        (expected ? " · listed in fixtures/expectations as " + expected : ""), "raw"));
      body.append(...historyNodes(name, check), ...pathNodes(name, r, check));
      if ((cell[CLOSE] || {}).gate) body.append(el("p", "the gate: " + cell[CLOSE].gate, "raw"));
      const close = closeness(cell);
      if (close) body.append(close);
      if (cell[CAUSE]) body.append(el("h4", "root cause"), withCode(el("p", null, "cause"), cell[CAUSE]));
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
    const more = el("p", null, "more");
    more.append(classLink(name));
    body.append(el("h4", "rerun this cell"), pre, copy, more);
    select(td || tdOf(name, r, c), [name, check, r]);
    opened = [name, check, r];
    byId("detail").hidden = false;
  }

  // -- a cell's history: its answer on each published transformers version, and in words ("works since 5.23")

  const HISTORY = { w: "works", b: "broken", c: "nocheck", n: "na", "-": "notrun" };
  function historyOf(name, check) {
    const h = data.history;
    if (!h || !h.versions || !h.cells[name]) return null;
    const c = h.columns.indexOf(check);
    return c < 0 ? null : h.cells[name].split(" ")[c];
  }

  function historyNodes(name, check) {
    const codes = historyOf(name, check);
    if (!codes) return [];
    const list = el("ol", null, "history");
    data.history.versions.forEach((version, i) => {
      const what = HISTORY[codes[i]], li = el("li", null, "h-" + what);
      li.append(el("span", data.answers[what][0] || " ", "v a-" + what), " transformers " + version + ": " +
        (what === "notrun" ? "not published" : data.answers[what][1]));
      list.append(li);
    });
    return [el("h4", "across transformers versions"), el("p", data.history.phrases[codes], "history-phrase"), list];
  }

  // -- the other columns of the cell's deploy path (the first screen's column), each with its answer

  function pathNodes(name, r, check) {
    if (r !== data.deploy.run) return [];
    const group = data.deploy.groups.find(([, checks]) => checks.includes(check));
    if (!group || group[1].length < 2) return [];
    const list = el("ul", null, "siblings");
    for (const other of group[1]) {
      const what = answerOf(name, r, other), li = el("li");
      li.append(el("span", data.answers[what][0] || " ", "v a-" + what), " ");
      li.append(other === check ? el("strong", other) : cellLink(name, other, r));
      const codes = historyOf(name, other);
      if (codes) li.append(el("span", " · " + data.history.phrases[codes], "history-phrase"));
      list.append(li);
    }
    return [el("h4", "the path " + group[0] + ", column by column"), list];
  }

  // -- a class's view: what works on which path, and what to do about the rest

  function openClass(name) {
    const info = data.classes[name];
    const body = byId("detail-body");
    body.replaceChildren(el("h3", name));
    const [family, modalities, kind, parameters] = info.facts;
    body.append(el("p", [family && "model_type " + family, modalities, kind,
      parameters && "tiny model " + parameters + " parameters"].filter(Boolean).join(" · "), "facts"));
    info.views.forEach((view, r) => {
      if (data.runs.length > 1) body.append(el("h4", data.runs[r].label, "run"));
      if (!view) { body.append(el("p", "not in this run")); return; }
      body.append(el("h4", "What works, path by path"));
      const list = el("ul", null, "paths");
      data.runs[r].paths.forEach(([path, checks], p) => {
        const state = view.states[p], li = el("li", null, "s-" + state);
        li.append(el("strong", path + ": "), el("span", STATE_WORDS[state], "state"));
        const kinds = Object.keys(GROUP_WORDS).filter((what) => checks.some((check) => answerOf(name, r, check) === what));
        for (const what of kinds) {
          const mine = checks.filter((check) => answerOf(name, r, check) === what);
          li.append(" · " + (kinds.length > 1 ? GROUP_WORDS[what] + " " : ""));
          mine.forEach((check, i) => {
            const mark = (data.cells[name][r][data.runs[r].checks.indexOf(check)] || [])[MARK];
            if (i) li.append(", ");
            li.append(cellLink(name, check, r, check + (mark === "new" ? " (new)" : mark === "improved" ? " (improved)" : "")));
          });
        }
        list.append(li);
      });
      body.append(list, el("h4", "What to do about the rest"));
      const todo = el("ul", null, "todo");
      for (const line of view.todo) todo.append(withCode(el("li"), line));
      body.append(todo);
    });
    select(null, [name]);
    const tr = rowOf(name);
    if (tr) tr.classList.add("opened");
    opened = [name];
    byId("detail").hidden = false;
  }
  function answerOf(name, r, check) {
    const cell = data.cells[name][r][data.runs[r].checks.indexOf(check)];
    return cell ? cell[ANSWER] : "notrun";
  }
  const STATE_WORDS = { works: "works", partly: "works in part", broken: "does not work",
                        nocheck: "the suite could not check it", na: "does not apply", notrun: "not run" };
  const GROUP_WORDS = { works: "works:", broken: "does not work:", nocheck: "could not check:",
                        na: "does not apply:", notrun: "not run:" };

  function select(td, where) {
    if (selected) selected.classList.remove("selected");
    document.querySelectorAll("tr.opened, td.g.selected").forEach((node) => {
      node.classList.remove("opened", "selected");
    });
    selected = td || null;
    if (selected) selected.classList.add("selected");
    if (where) {
      const group = where[1] && data.deploy.groups.find(([, checks]) => checks.includes(where[1]));
      const row = deployRows[data.names.indexOf(where[0])];
      if (row && group && where[2] === data.deploy.run) {
        const g = row.querySelector('td.g[data-group="' + CSS.escape(group[0]) + '"]');
        if (g) g.classList.add("selected");
      }
      if (row && !where[1]) row.classList.add("opened");
    }
  }

  // a deep link: the class's row on the first screen, in the middle of the window (the detail is in a corner),
  // else the matrix's cell
  function reveal(name, td) {
    const row = deployRows[data.names.indexOf(name)];
    if (row && !row.hidden) row.scrollIntoView({ block: "center" });
    else if (td) td.scrollIntoView({ block: "nearest", inline: "nearest" });
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
    select(null);
    opened = null;
    writeHash();
  }

  function openCell(name, check, run) {
    const r = run !== undefined ? run : data.runs.findIndex((x) => x.checks.includes(check));
    const c = r >= 0 ? data.runs[r].checks.indexOf(check) : -1;
    if (c < 0) { openClass(name); return; }
    showCell(name, r, c);
    writeHash();
  }

  tbody.addEventListener("click", (event) => {
    const link = event.target.closest("th.name a");
    if (link) {
      event.preventDefault();
      openClass(data.names[link.closest("tr").dataset.i]);
      writeHash();
      return;
    }
    const td = event.target.closest("td.v");
    if (td) { show(td); writeHash(); }
  });
  tbody.addEventListener("keydown", (event) => {
    const td = event.target.closest("td.v");
    if (td && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); show(td); writeHash(); }
  });
  tbody.addEventListener("mouseover", (event) => { // the answer and reason on hover, written when first needed
    const td = event.target.closest("td.v");
    if (!td || td.title) return;
    const cell = cellAt(td.parentElement, td.cellIndex - FIXED);
    td.title = cell ? answerLine(cell) + (cell[REASON] >= 0 ? "\n" + data.reasons[cell[REASON]].slice(0, 300) : "")
      : data.answers.notrun[1];
  });
  if (deploy) deploy.tBodies[0].addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link) return;
    event.preventDefault();
    const name = data.names[deployRows.indexOf(link.closest("tr"))];
    if (link.dataset.check) openCell(name, link.dataset.check, Number(link.dataset.run));
    else { openClass(name); writeHash(); }
  });
  byId("detail-close").addEventListener("click", hide);
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") hide(); });

  // -- the URL fragment: #Class[/check[/run]][?check=..&verdict=..&modality=..&family=..&q=..&all=1]

  function rowOf(name) { return rows.find((tr) => data.names[tr.dataset.i] === name) || null; }
  function tdOf(name, r, c) {
    const tr = rowOf(name), column = columns.findIndex(([x, y]) => x === r && y === c);
    return tr && column >= 0 ? tr.cells[FIXED + column] : null;
  }

  function findClass(text) {
    const wanted = text.toLowerCase();
    return data.names.find((n) => n === text) || data.names.find((n) => n.toLowerCase() === wanted) ||
      data.names.find((n) => short(n).toLowerCase() === wanted) || null;
  }

  function target(name, check, run) {
    let text = encodeURIComponent(short(name));
    if (check) text += "/" + encodeURIComponent(check).replace(/%40/g, "@");
    if (check && run) text += "/" + (run + 1);
    return text;
  }

  function writeHash() {
    const query = new URLSearchParams();
    for (const [key, id] of Object.entries(FILTERS)) if (byId(id).value) query.set(key, byId(id).value);
    if (byId("f-all").checked) query.set("all", "1");
    const where = opened ? target(opened[0], opened[1], opened[2]) : "";
    const text = where + (query.toString() ? "?" + query.toString() : "");
    try {
      history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
    } catch (error) { /* a browser that refuses: the address just does not follow */ }
  }

  function readHash() {
    const text = location.hash.replace(/^#/, "");
    if (/^[a-z-]+$/.test(text) && byId(text) && byId(text).tagName === "SECTION") return; // a link to a section
    const [where, query] = [text.split("?")[0], text.split("?").slice(1).join("?")];
    const params = new URLSearchParams(query);
    for (const [key, id] of Object.entries(FILTERS)) {
      const value = params.get(key) || "";
      const node = byId(id);
      node.value = value;
      if (node.value !== value) node.value = ""; // an option the page does not have
    }
    const [classPart, checkPart, runPart] = where.split("/").map((p) => decodeURIComponent(p));
    const name = classPart ? findClass(classPart) : null;
    byId("f-all").checked = params.get("all") === "1" || Boolean(name && data.classes[name].hidden);
    apply();
    if (!name) { if (opened) { byId("detail").hidden = true; select(null); opened = null; } return; }
    if (checkPart) {
      const run = runPart ? Number(runPart) - 1 : undefined;
      const r = run !== undefined ? run : data.runs.findIndex((x) => x.checks.includes(checkPart));
      const c = r >= 0 && data.runs[r] ? data.runs[r].checks.indexOf(checkPart) : -1;
      if (c >= 0) { showCell(name, r, c); reveal(name, tdOf(name, r, c)); return; }
    }
    openClass(name);
    reveal(name, rowOf(name));
  }
  window.addEventListener("hashchange", readHash);

  // -- the second header row sticks below the first

  function measure() {
    const runs = table.querySelector("thead tr.runs");
    table.style.setProperty("--runs-height", runs ? runs.getBoundingClientRect().height + "px" : "0px");
    const top = document.getElementById("top"); // the sticky header: the first screen's table heads stick below it
    document.documentElement.style.setProperty("--top-height", top ? top.getBoundingClientRect().height + "px" : "0px");
  }
  window.addEventListener("resize", measure);
  readHash();
})();
