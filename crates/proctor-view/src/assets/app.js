// proctor view: filters, sorting, keyboard navigation through trial rows, live counts while a
// run goes, and the transcript's visible window. No library.
"use strict";
(function () {
  function rows(table) { return Array.prototype.slice.call(table.tBodies[0].rows); }

  // Filters applied in the page (the runs page, and an export's trial table).
  function applyFilters(box) {
    var table = box.nextElementSibling;
    while (table && table.tagName !== "TABLE") { table = table.nextElementSibling; }
    if (!table) { return; }
    var filters = box.querySelectorAll("[data-filter]");
    var shown = 0;
    rows(table).forEach(function (tr) {
      var ok = true;
      filters.forEach(function (f) {
        var key = f.getAttribute("data-filter");
        if (f.type === "checkbox") {
          if (f.checked && tr.getAttribute("data-differs") !== "true") { ok = false; }
        } else if (key === "text") {
          var q = f.value.trim().toLowerCase();
          if (q && (tr.getAttribute("data-text") || "").toLowerCase().indexOf(q) < 0) { ok = false; }
        } else if (f.value && tr.getAttribute("data-" + key) !== f.value) { ok = false; }
      });
      tr.hidden = !ok;
      if (ok) { shown += 1; }
    });
    var count = box.querySelector("[data-count]");
    if (count) { count.textContent = shown + " of " + rows(table).length + " shown"; }
  }
  document.querySelectorAll("div.filters").forEach(function (box) {
    box.addEventListener("input", function () { applyFilters(box); });
    box.addEventListener("change", function () { applyFilters(box); });
    applyFilters(box);
    var sort = box.querySelector("[data-sort]");
    if (sort) {
      sort.addEventListener("click", function () {
        var table = document.getElementById("runs");
        var body = table.tBodies[0];
        rows(table).reverse().forEach(function (tr) { body.appendChild(tr); });
        sort.textContent = sort.textContent === "Oldest first" ? "Newest first" : "Oldest first";
      });
    }
  });

  // A filter form read by the server: a change asks for the filtered first page.
  document.querySelectorAll("form[data-autosubmit]").forEach(function (form) {
    form.addEventListener("change", function () { form.submit(); });
  });

  // Keyboard: j/k (or the arrow keys on a row) move through a table's rows; Enter opens the
  // row's first link.
  document.querySelectorAll("table[data-keys]").forEach(function (table) {
    var visible = function () { return rows(table).filter(function (tr) { return !tr.hidden; }); };
    var first = visible()[0];
    if (first) { first.tabIndex = 0; }
    function move(from, step) {
      var list = visible();
      var i = list.indexOf(from);
      var to = list[i < 0 ? 0 : Math.max(0, Math.min(list.length - 1, i + step))];
      if (!to) { return; }
      list.forEach(function (tr) { tr.tabIndex = -1; });
      to.tabIndex = 0;
      to.focus();
    }
    document.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey) { return; }
      var t = e.target;
      var row = t && t.closest ? t.closest("tr") : null;
      var inTable = row && table.contains(row) && row.parentNode.tagName === "TBODY";
      if (/^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(t.tagName)) { return; }
      var down = e.key === "j" || (inTable && e.key === "ArrowDown");
      var up = e.key === "k" || (inTable && e.key === "ArrowUp");
      if (down || up) {
        e.preventDefault();
        move(inTable ? row : null, down ? 1 : -1);
      } else if (e.key === "Enter" && inTable && t === row) {
        var link = row.querySelector("a[href]");
        if (link) { e.preventDefault(); link.click(); }
      }
    });
  });

  // A transcript: the server rendered its first lines; here the whole of it is shown a window
  // at a time, its lines asked for in chunks as they come into view (a 50 MB transcript is never
  // in the page whole). A link to #tx-SOURCE-N opens it at line N.
  document.querySelectorAll(".tx[data-transcript]").forEach(function (box) {
    if (location.protocol === "file:") { return; }
    var api = box.getAttribute("data-transcript");
    var source = box.getAttribute("data-source");
    var rowsEl = box.querySelector(".tx-rows");
    var CHUNK = 200, KEEP = 12, MAX_HEIGHT = 8000000;
    var chunks = new Map(), pending = {}, total = null, jumped = false;
    var rowH = (rowsEl.firstElementChild && rowsEl.firstElementChild.offsetHeight) || 18;
    var space = document.createElement("div");
    space.className = "tx-space";
    var status = document.createElement("p");
    status.className = "note tx-status";
    status.setAttribute("aria-live", "polite");
    // A chunk's lines; a slice of long lines may come back shorter than asked, and the rest of
    // the chunk is asked for next.
    function load(c) {
      if (c < 0 || chunks.has(c) || pending[c] || (total !== null && c * CHUNK >= total)) { return; }
      pending[c] = true;
      var got = [];
      function more() {
        var from = c * CHUNK + got.length;
        fetch(api + "&from=" + from + "&count=" + (CHUNK - got.length))
          .then(function (r) { return r.json(); })
          .then(function (s) {
            if (s.error) { delete pending[c]; status.textContent = s.error; return; }
            total = s.total;
            got = got.concat(s.lines);
            var want = Math.min(CHUNK, total - c * CHUNK);
            if (got.length < want && s.lines.length > 0) { more(); return; }
            delete pending[c];
            chunks.set(c, got);
            render();
          }).catch(function () { delete pending[c]; });
      }
      more();
    }
    function row(line, n) {
      var div = document.createElement("div");
      div.className = "tx-row";
      var num = document.createElement("span");
      num.className = "tx-n";
      num.textContent = String(n);
      div.appendChild(num);
      div.appendChild(document.createTextNode(" "));
      var kind = document.createElement("span");
      kind.className = "tx-kind";
      div.appendChild(kind);
      div.appendChild(document.createTextNode(" "));
      var text = document.createElement("span");
      text.className = "tx-text";
      div.appendChild(text);
      if (line) { kind.textContent = line.kind; text.textContent = line.text; div.title = line.raw; }
      else { text.textContent = "…"; }
      return div;
    }
    function render() {
      if (total === null) { return; }
      if (!box.classList.contains("tx-virtual")) {
        box.classList.add("tx-virtual");
        box.insertBefore(space, rowsEl);
        box.parentNode.insertBefore(status, box.nextSibling);
        var note = box.parentNode.querySelector(".tx-note");
        if (note) { note.hidden = true; }
      }
      var full = total * rowH, height = Math.min(full, MAX_HEIGHT);
      space.style.height = height + "px";
      if (!jumped) {
        jumped = true;
        var m = /^#tx-(\w+)-(\d+)$/.exec(location.hash);
        if (m && m[1] === source) {
          var target = (Number(m[2]) - 1) * rowH;
          box.scrollTop = full > height ? target * (height - box.clientHeight) / (full - box.clientHeight) : target;
          box.focus();
        }
      }
      var scale = full > height ? (full - box.clientHeight) / Math.max(1, height - box.clientHeight) : 1;
      var top = box.scrollTop * scale;
      var first = Math.min(Math.floor(top / rowH), Math.max(0, total - 1));
      var count = Math.min(total - first, Math.ceil(box.clientHeight / rowH) + 1);
      var c0 = Math.floor(first / CHUNK), c1 = Math.floor((first + count) / CHUNK);
      for (var c = c0 - 1; c <= c1 + 1; c++) { load(c); }
      chunks.forEach(function (_, k) { if (k < c0 - KEEP || k > c1 + KEEP) { chunks.delete(k); } });
      var frag = document.createDocumentFragment();
      for (var i = first; i < first + count; i++) {
        var lines = chunks.get(Math.floor(i / CHUNK));
        frag.appendChild(row(lines ? lines[i % CHUNK] : null, i + 1));
      }
      rowsEl.textContent = "";
      rowsEl.appendChild(frag);
      rowsEl.style.top = (box.scrollTop - (top % rowH)) + "px";
      status.textContent = total === 0 ? "empty" : "lines " + (first + 1) + "–" + (first + count) + " of " + total;
    }
    var queued = false;
    box.addEventListener("scroll", function () {
      if (queued) { return; }
      queued = true;
      requestAnimationFrame(function () { queued = false; render(); });
    });
    var m = /^#tx-(\w+)-(\d+)$/.exec(location.hash);
    if (m && m[1] === source) { load(Math.floor((Number(m[2]) - 1) / CHUNK)); }
    load(0);
  });

  var live = document.body.getAttribute("data-live");
  if (!live || location.protocol === "file:") { return; }
  function poll() {
    fetch(live).then(function (r) { return r.json(); }).then(function (data) {
      if (Array.isArray(data)) {
        var running = false;
        data.forEach(function (run) {
          var tr = document.querySelector('tr[data-run="' + run.run + '"]');
          if (run.status === "running") { running = true; }
          if (!tr) { return; }
          tr.querySelector('[data-field="status"]').textContent = run.status;
          tr.querySelector('[data-field="trials"]').textContent = run.finished + "/" + run.planned;
          tr.querySelector('[data-field="outcomes"]').textContent = Object.keys(run.outcomes)
            .map(function (o) { return o + " " + run.outcomes[o]; }).join(", ");
        });
        if (running) { setTimeout(poll, 2000); }
      } else if (data.meta) {
        var shown = Number(document.querySelector('[data-field="trials"]').textContent);
        if (data.meta.status !== "running" || data.finished !== shown) {
          location.reload();
        } else { setTimeout(poll, 2000); }
      }
    }).catch(function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 2000);
})();
