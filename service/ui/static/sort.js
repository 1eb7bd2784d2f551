// Sorting of the UI's tables: a click on a header with data-sort orders the rows by the
// data-value of that column's cells (numbers ascending = best first on a leaderboard, whose
// server writes each metric's sort key so that lower is better; text alphabetically); a
// second click reverses. Cells without a value go last. The header links stay as the
// server-side fallback (?sort=) when this script does not run.
(function () {
  "use strict";

  function key(cell) {
    if (!cell) { return null; }
    var raw = cell.getAttribute("data-value");
    if (raw === null || raw === "") { return null; }
    var num = Number(raw);
    return isNaN(num) ? raw.toLowerCase() : num;
  }

  function compare(a, b) {
    if (typeof a === "number" && typeof b === "number") { return a - b; }
    return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
  }

  function sortBy(table, th) {
    var headers = Array.prototype.slice.call(th.parentNode.children);
    var index = headers.indexOf(th);
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = table.getAttribute("data-sorted") === th.getAttribute("data-sort") &&
      table.getAttribute("data-order") !== "desc";
    var keyed = rows.map(function (row, i) { return [key(row.cells[index]), i, row]; });
    keyed.sort(function (x, y) {
      if (x[0] === null && y[0] === null) { return x[1] - y[1]; }
      if (x[0] === null) { return 1; }
      if (y[0] === null) { return -1; }
      var c = compare(x[0], y[0]);
      if (descending) { c = -c; }
      return c !== 0 ? c : x[1] - y[1];
    });
    keyed.forEach(function (k) { body.appendChild(k[2]); });
    table.setAttribute("data-sorted", th.getAttribute("data-sort"));
    table.setAttribute("data-order", descending ? "desc" : "asc");
    headers.forEach(function (h) {
      h.classList.remove("sorted");
      h.removeAttribute("aria-sort");
    });
    th.classList.add("sorted");
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function init() {
    var tables = document.querySelectorAll("table.sortable");
    Array.prototype.forEach.call(tables, function (table) {
      var heads = table.querySelectorAll("thead th[data-sort]");
      Array.prototype.forEach.call(heads, function (th) {
        th.addEventListener("click", function (event) {
          event.preventDefault();
          sortBy(table, th);
        });
      });
      table.setAttribute("data-ready", "1");
    });
    document.documentElement.setAttribute("data-sort-ready", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
