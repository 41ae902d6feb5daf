// mpir report: draws the JSON documents embedded in this page (element #mpir-data). Every
// string from the target goes into the page as text (textContent, SVG text nodes, attribute
// values that are never URLs or handlers): nothing in the data is parsed as markup.
(function () {
  'use strict';
  var MAX_ROWS = 500;        // table rows drawn at once; the filter narrows the rest
  var MAX_MATCHES = 500;     // search hits revealed in the tree
  var AUTO_ROWS = 200;       // tree rows opened on first view
  var MAX_GROUPS = 2000;     // wait-for graph nodes drawn
  var CYCLE_SINGLE = 64;     // cycles up to this many ranks draw one node per rank

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      parent.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return parent;
  }
  var SVG = 'http://www.w3.org/2000/svg';
  function sv(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function str(v) { return typeof v === 'string' ? v : (v === null || v === undefined ? '' : String(v)); }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  function base(path) { var s = str(path); var i = s.lastIndexOf('/'); return i >= 0 ? s.slice(i + 1) : s; }
  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : (many || one + 's')); }

  // Rank sets as the documents write them ("0-3,7,9-12"): sorted ranges, never expanded.
  function RankSet(text) {
    this.text = str(text);
    this.ranges = [];
    var parts = this.text.split(',');
    for (var i = 0; i < parts.length && i < 100000; i++) {
      var p = parts[i].trim();
      if (!p) continue;
      var m = /^(\d+)(?:-(\d+))?$/.exec(p);
      if (!m) continue;
      var lo = parseInt(m[1], 10), hi = m[2] === undefined ? lo : parseInt(m[2], 10);
      if (hi >= lo) this.ranges.push([lo, hi]);
    }
    this.ranges.sort(function (a, b) { return a[0] - b[0]; });
  }
  RankSet.prototype.has = function (r) {
    var a = 0, b = this.ranges.length - 1;
    while (a <= b) {
      var m = (a + b) >> 1, g = this.ranges[m];
      if (r < g[0]) b = m - 1; else if (r > g[1]) a = m + 1; else return true;
    }
    return false;
  };
  RankSet.prototype.count = function () {
    var n = 0;
    for (var i = 0; i < this.ranges.length; i++) n += this.ranges[i][1] - this.ranges[i][0] + 1;
    return n;
  };
  RankSet.prototype.empty = function () { return this.ranges.length === 0; };
  RankSet.prototype.intersects = function (o) {
    var i = 0, j = 0;
    while (i < this.ranges.length && j < o.ranges.length) {
      var a = this.ranges[i], b = o.ranges[j];
      if (a[1] < b[0]) i++; else if (b[1] < a[0]) j++; else return true;
    }
    return false;
  };
  function setText(ranks) {
    // A compact rank-set string of a sorted, de-duplicated list of numbers.
    var out = [], i = 0;
    while (i < ranks.length) {
      var j = i;
      while (j + 1 < ranks.length && ranks[j + 1] === ranks[j] + 1) j++;
      out.push(j > i ? ranks[i] + '-' + ranks[j] : String(ranks[i]));
      i = j + 1;
    }
    return out.join(',');
  }

  var data, docs;
  try {
    data = JSON.parse(document.getElementById('mpir-data').textContent);
  } catch (e) {
    data = null;
  }
  var app = document.getElementById('app');

  // A table with these column heads: {table, body}.
  function dataTable(id, heads) {
    var table = el('table', 'data');
    if (id) table.id = id;
    var hd = el('tr');
    heads.forEach(function (h) { add(hd, el('th', null, h)); });
    var body = el('tbody');
    add(table, add(el('thead'), hd), body);
    return { table: table, body: body };
  }

  function section(id, title) {
    var s = el('section', 'card');
    s.id = id;
    add(s, el('h2', null, title));
    app.appendChild(s);
    return s;
  }

  // ---- the verdict ----------------------------------------------------------------------
  var VERDICTS = {
    deadlock: ['hang', 'Deadlock', 'ranks wait for each other in a cycle, the same in every sample'],
    potential_deadlock: ['hang', 'Potential deadlock', 'a cycle of waits at one instant (one sample: it may still move)'],
    collective_mismatch: ['hang', 'Collective mismatch', 'ranks are in different collectives, or some are in a collective while others are elsewhere'],
    potential_collective_mismatch: ['hang', 'Potential collective mismatch', 'ranks in different collectives at one instant'],
    blocked_in_mpi: ['hang', 'Blocked in MPI', 'every rank is inside MPI and none moved; who waits for whom is not known'],
    potential_blocked_in_mpi: ['warn', 'Possibly blocked in MPI', 'every rank is inside MPI at one instant'],
    no_cycle: ['ok', 'No hang found', 'no cycle among the ranks read'],
    unknown: ['unknown', 'No verdict', 'no rank could be read']
  };

  function verdict(dl, st, notes) {
    var s = section('verdict', 'Verdict');
    var box = el('div', 'verdict');
    var kind, head, why;
    if (dl && typeof dl.verdict === 'string') {
      var v = VERDICTS[dl.verdict] || ['unknown', dl.verdict, ''];
      kind = v[0]; head = v[1]; why = v[2];
      if (dl.verdict === 'no_cycle' && arr(dl.blocked).length) {
        kind = 'hang'; head = 'Ranks wait on ranks that cannot answer';
        why = 'no cycle, but ranks wait for ranks that finished or are blocked';
      }
      if (dl.verdict === 'no_cycle' && !(dl.coverage && dl.coverage.complete)) {
        kind = 'warn'; head = 'No hang found among the ranks read';
        why = 'some ranks were not read: nothing is said about them';
      }
    } else if (dl && dl.error) {
      kind = 'unknown'; head = 'No verdict'; why = str(dl.error);
    } else if (st) {
      var unmoved = new RankSet(st.unmoved);
      kind = 'info'; head = 'Stacks only';
      why = 'no wait-for analysis in this report' +
        (st.unmoved !== null && st.unmoved !== undefined && num(st.samples) > 1
          ? (unmoved.empty() ? '; every rank moved between samples'
            : '; did not move in ' + st.samples + ' samples: ranks ' + unmoved.text)
          : '');
    } else {
      kind = 'unknown'; head = 'Nothing read'; why = 'this report holds no stacks and no wait-for analysis';
    }
    box.className = 'verdict ' + kind;
    box.dataset.kind = kind;
    add(box, el('div', 'verdict-head', head), el('div', 'verdict-why', why));
    add(s, box);
    if (dl) {
      var c = dl.coverage || {};
      var line = 'Wait-for analysis: ' + (num(c.read) !== null ? c.read : '?') + ' of ' +
        (num(c.ranks) !== null ? c.ranks : '?') + ' ranks read' +
        (num(dl.samples) ? ', ' + plural(dl.samples, 'sample') : '') +
        (dl.engine ? ', with ' + str(dl.engine) : '');
      add(s, el('p', 'coverage', line));
      arr(dl.cycles).forEach(function (cy, i) {
        var chain = arr(cy.chain);
        var first = chain[0] || {};
        var b = first.blocked_in || {};
        // A ring when each step waits for the next and the last for the first; otherwise
        // (a knot of wildcard receives) each step's wait as it is.
        var ring = chain.length > 0 && chain.every(function (c, k) {
          return c.waits_for === chain[(k + 1) % chain.length].rank;
        });
        var steps = ring
          ? chain.map(function (c) { return str(c.rank); }).concat([str(first.rank)]).join(' \u2192 ')
          : chain.map(function (c) { return str(c.rank) + ' \u2192 ' + str(c.waits_for); }).join(', ');
        var members = arr(cy.ranks);
        var wild = arr(dl.waits).some(function (w) {
          return w.target && w.target.any_source && members.indexOf(w.rank) >= 0;
        });
        if (members.length !== chain.length || wild) {
          steps += ' (ranks ' + members.map(str).join(', ') + (wild ? '; a knot: wildcard receives none of them can satisfy' : '') + ')';
        }
        var txt = 'Cycle ' + (i + 1) + ': ' + steps +
          (b.call ? ', in ' + str(b.call) : '') + callSiteText(b.call_site, ' at ') +
          (arr(cy.communicators).length ? ' on ' + arr(cy.communicators).map(function (c) { return commText(c); }).join(', ') : '');
        add(s, el('p', 'cycle-line', txt));
      });
      arr(dl.blocked).forEach(function (bl) {
        var b = bl.blocked_in || {};
        add(s, el('p', 'blocked-line', 'Rank ' + str(bl.rank) + ' waits for ranks ' + setText(arr(bl.waits_for).filter(function (r) { return num(r) !== null; }).sort(function (a, b) { return a - b; })) +
          ', which cannot answer' + (b.call ? ': in ' + str(b.call) : '') + callSiteText(b.call_site, ' at ')));
      });
      arr(dl.collective).forEach(function (co) {
        var parts = arr(co.calls).map(function (c) { return str(c.call) + ' (ranks ' + str(c.ranks) + ')'; });
        var el2 = arr(co.elsewhere).map(function (e) { return 'ranks ' + str(e.ranks); });
        add(s, el('p', 'cycle-line', 'Collectives: ' + parts.join(' vs ') + (el2.length ? '; elsewhere: ' + el2.join(', ') : '')));
      });
      var unread = arr(c.not_read).concat(arr(c.stacks_only));
      if (unread.length) {
        var d = el('details', 'unread');
        add(d, el('summary', null, 'Not read: ' + plural(arr(c.not_read).length, 'rank') +
          (arr(c.stacks_only).length ? '; queues not read (stacks used) for ' + plural(arr(c.stacks_only).length, 'rank') : '')));
        var ul = el('ul');
        unread.slice(0, 1000).forEach(function (u) {
          add(ul, el('li', null, (u.rank === null || u.rank === undefined ? 'pid ' + str(u.pid) : 'rank ' + u.rank + ' (pid ' + str(u.pid) + ')') + ': ' + str(u.reason)));
        });
        if (unread.length > 1000) add(ul, el('li', null, (unread.length - 1000) + ' more'));
        add(d, ul);
        add(s, d);
      }
      arr(dl.notes).forEach(function (n) { add(s, el('p', 'note', str(n))); });
    }
    if (st) {
      var sc = st.coverage || {};
      add(s, el('p', 'coverage', 'Stacks: ' + (num(sc.read) !== null ? sc.read : '?') + ' of ' +
        (num(sc.ranks) !== null ? sc.ranks : '?') + ' ranks read' + (num(st.samples) ? ', ' + plural(st.samples, 'sample') : '')));
      var un = arr(st.unreached);
      if (un.length) {
        var d2 = el('details', 'unread');
        add(d2, el('summary', null, 'Stacks not read: ' + plural(un.length, 'rank')));
        var ul2 = el('ul');
        un.slice(0, 1000).forEach(function (u) {
          add(ul2, el('li', null, (u.rank === null || u.rank === undefined ? 'pid ' + str(u.pid) : 'rank ' + u.rank) + ': ' + str(u.reason)));
        });
        add(d2, ul2);
        add(s, d2);
      }
    }
    notes.forEach(function (n) { add(s, el('p', 'note', str(n))); });
  }

  function callSiteText(cs, prefix) {
    if (!cs || typeof cs !== 'object') return '';
    var loc = cs.location || null;
    var f = str(cs.function);
    var where = loc && loc.file ? base(loc.file) + (num(loc.line) !== null ? ':' + loc.line : '') : '';
    if (!f && !where) return '';
    return prefix + (f || '?') + (where ? ' (' + where + ')' : '');
  }
  function commText(c) {
    if (!c || typeof c !== 'object') return '';
    return str(c.name) || ('context ' + str(c.context_id));
  }

  // ---- the stack tree -------------------------------------------------------------------
  function tree(st) {
    var s = section('stacks', 'Merged stacks');
    var nodes = arr(st.nodes);
    if (!nodes.length) { add(s, el('p', 'empty', 'No stacks were read.')); return; }
    var n = nodes.length;
    var kids = new Array(n), sets = new Array(n), ends = new Array(n), depth = new Array(n);
    for (var i = 0; i < n; i++) { kids[i] = []; }
    var roots = [];
    for (i = 0; i < n; i++) {
      var p = nodes[i].parent;
      // A parent must come before its child (the document's order): anything else is a root.
      if (typeof p === 'number' && p >= 0 && p < i) { kids[p].push(i); depth[i] = depth[p] + 1; }
      else { roots.push(i); depth[i] = 0; }
      sets[i] = new RankSet(nodes[i].ranks);
      ends[i] = new RankSet(nodes[i].ends);
    }
    var unmoved = st.unmoved === null || st.unmoved === undefined ? null : new RankSet(st.unmoved);
    var row = new Array(n), childList = new Array(n), open = new Array(n);

    var tools = el('div', 'tools');
    var search = el('input', 'search');
    search.id = 'tree-search';
    search.type = 'search';
    search.placeholder = 'Search a function, file or rank number';
    search.setAttribute('aria-label', 'search the stack tree');
    var status = el('span', 'status');
    status.id = 'tree-search-status';
    var expandAll = el('button', null, 'Expand all');
    expandAll.id = 'tree-expand-all';
    var collapseAll = el('button', null, 'Collapse all');
    collapseAll.id = 'tree-collapse-all';
    add(tools, search, expandAll, collapseAll, status);
    add(s, tools);
    var meta = [str(st.view) === 'thread' ? 'one subtree per thread kind' : 'every thread of a rank merged',
      'merged by ' + (str(st.merge_key) || 'function')];
    if (unmoved && num(st.samples) > 1) meta.push(unmoved.empty() ? 'every rank moved' : 'did not move in ' + st.samples + ' samples: ' + unmoved.text);
    add(s, el('p', 'meta', meta.join('; ')));
    var top = el('ul', 'tree');
    top.id = 'tree';
    add(s, top);

    function label(i) {
      var nd = nodes[i];
      var r = el('div', 'row');
      r.dataset.node = String(i);
      var t = el('button', 'toggle', kids[i].length ? '\u25B8' : '\u00B7');
      t.setAttribute('aria-label', 'expand');
      if (!kids[i].length) t.disabled = true;
      t.addEventListener('click', function () { toggle(i); });
      var kind = str(nd.kind);
      var fn = el('span', 'fn ' + (kind === 'python' ? 'py' : kind === 'root' ? 'root' : 'native'), str(nd.function) || '??');
      add(r, t, fn);
      if (nd.file) add(r, el('span', 'loc', base(nd.file) + (num(nd.line) !== null ? ':' + nd.line : '')));
      if (nd.module) {
        var m = el('span', 'mod', base(nd.module));
        m.title = str(nd.module);
        add(r, m);
      }
      var rk = el('span', 'ranks', '[' + sets[i].text + ']');
      rk.title = plural(sets[i].count(), 'rank') + (num(nd.threads) !== null ? ', ' + plural(nd.threads, 'thread') : '');
      add(r, rk, el('span', 'count', String(sets[i].count())));
      if (!ends[i].empty()) {
        var cls = el('span', 'class', 'class of ' + ends[i].count() + ': [' + ends[i].text + ']');
        add(r, cls);
        if (unmoved && num(st.samples) > 1 && ends[i].intersects(unmoved)) {
          r.classList.add('unmoved');
          add(r, el('span', 'badge unmoved-badge', 'did not move'));
        }
      }
      if (nd.truncated) add(r, el('span', 'badge warn', 'cut short: [' + str(nd.truncated) + ']'));
      if (nd.trust && nd.trust !== 'cfi' && nd.trust !== 'context') add(r, el('span', 'trust', str(nd.trust)));
      return r;
    }
    function render(i, into) {
      var li = el('li');
      li.dataset.node = String(i);
      row[i] = label(i);
      add(li, row[i]);
      into.appendChild(li);
      return li;
    }
    function expand(i) {
      if (open[i] || !kids[i].length) return;
      if (!childList[i]) {
        childList[i] = el('ul');
        for (var k = 0; k < kids[i].length; k++) render(kids[i][k], childList[i]);
        row[i].parentNode.appendChild(childList[i]);
      }
      childList[i].hidden = false;
      open[i] = true;
      var t = row[i].querySelector('.toggle');
      t.textContent = '\u25BE';
      t.setAttribute('aria-label', 'collapse');
      row[i].parentNode.classList.add('open');
    }
    function collapse(i) {
      if (!open[i]) return;
      childList[i].hidden = true;
      open[i] = false;
      var t = row[i].querySelector('.toggle');
      t.textContent = '\u25B8';
      t.setAttribute('aria-label', 'expand');
      row[i].parentNode.classList.remove('open');
    }
    function toggle(i) { if (open[i]) collapse(i); else expand(i); }
    function reveal(i) {
      var path = [];
      for (var j = i; ; j = nodes[j].parent) {
        path.push(j);
        if (!(typeof nodes[j].parent === 'number' && nodes[j].parent >= 0 && nodes[j].parent < j)) break;
      }
      for (var k = path.length - 1; k > 0; k--) expand(path[k]);
    }
    roots.forEach(function (r) { render(r, top); });
    // Open breadth first while the tree stays short.
    var queue = roots.slice(), shown = roots.length;
    while (queue.length) {
      var q = queue.shift();
      if (shown + kids[q].length > AUTO_ROWS) continue;
      expand(q);
      shown += kids[q].length;
      for (var k2 = 0; k2 < kids[q].length; k2++) queue.push(kids[q][k2]);
    }
    expandAll.addEventListener('click', function () {
      var budget = 20000;
      for (var a = 0; a < n && budget > 0; a++) { if (kids[a].length) { reveal(a); expand(a); budget -= kids[a].length; } }
      status.textContent = budget > 0 ? '' : 'expanded the first 20000 frames';
    });
    collapseAll.addEventListener('click', function () {
      for (var a = n - 1; a >= 0; a--) collapse(a);
      roots.forEach(function (r) { expand(r); });
    });
    var marked = [];
    function find() {
      for (var a = 0; a < marked.length; a++) if (row[marked[a]]) row[marked[a]].classList.remove('match');
      marked = [];
      var qv = search.value.trim();
      if (!qv) { status.textContent = ''; return; }
      var hits = [];
      if (/^\d+$/.test(qv)) {
        var r = parseInt(qv, 10);
        for (var b = 0; b < n; b++) if (sets[b].has(r)) hits.push(b);
        status.textContent = hits.length ? 'rank ' + r + ': ' + plural(hits.length, 'frame') : 'rank ' + r + ' is in no stack';
      } else {
        var low = qv.toLowerCase();
        for (var c = 0; c < n; c++) {
          var nd = nodes[c];
          if (str(nd.function).toLowerCase().indexOf(low) >= 0 || str(nd.file).toLowerCase().indexOf(low) >= 0 ||
            str(nd.module).toLowerCase().indexOf(low) >= 0) hits.push(c);
        }
        status.textContent = hits.length ? plural(hits.length, 'frame') + ' match' : 'no frame matches';
      }
      var shownHits = hits.slice(0, MAX_MATCHES);
      shownHits.forEach(function (h) { reveal(h); row[h].classList.add('match'); });
      marked = shownHits;
      if (hits.length > MAX_MATCHES) status.textContent += ' (the first ' + MAX_MATCHES + ' shown)';
      if (shownHits.length) row[shownHits[shownHits.length - 1]].scrollIntoView({ block: 'nearest' });
    }
    var timer = null;
    search.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(find, 120); });
    search.addEventListener('keydown', function (e) { if (e.key === 'Enter') { clearTimeout(timer); find(); } });

    // Equivalence classes: the ranks that end at each leaf, largest first.
    var classes = [];
    for (var c2 = 0; c2 < n; c2++) if (!ends[c2].empty()) classes.push(c2);
    classes.sort(function (a, b) { return ends[b].count() - ends[a].count(); });
    var cs = el('div', 'classes');
    cs.id = 'classes';
    add(cs, el('h3', null, plural(classes.length, 'equivalence class', 'equivalence classes')));
    var ct = dataTable(null, ['ranks', 'count', 'innermost frames', '']);
    var body = ct.body;
    classes.slice(0, MAX_ROWS).forEach(function (ci) {
      var tr = el('tr');
      tr.dataset.node = String(ci);
      var names = [];
      for (var j = ci, d = 0; d < 4; d++) {
        names.push(str(nodes[j].function));
        var pj = nodes[j].parent;
        if (!(typeof pj === 'number' && pj >= 0 && pj < j) || nodes[pj].kind === 'root') break;
        j = pj;
      }
      var show = el('button', null, 'show');
      show.addEventListener('click', function () { reveal(ci); row[ci].classList.add('match'); marked.push(ci); row[ci].scrollIntoView({ block: 'center' }); });
      var tdr = el('td', 'ranks', ends[ci].text);
      if (unmoved && num(st.samples) > 1 && ends[ci].intersects(unmoved)) tdr.classList.add('unmoved');
      add(tr, tdr, el('td', 'num', String(ends[ci].count())), el('td', null, names.join(' \u2190 ')), add(el('td'), show));
      add(body, tr);
    });
    add(cs, ct.table);
    if (classes.length > MAX_ROWS) add(cs, el('p', 'note', (classes.length - MAX_ROWS) + ' smaller classes not listed'));
    add(s, cs);
    var py = st.python || {};
    arr(py.versions).forEach(function (v) { add(s, el('p', 'note', 'ranks running CPython ' + str(v.version) + ': [' + str(v.ranks) + ']')); });
    arr(py.problems).forEach(function (v) { add(s, el('p', 'note', 'Python frames not read: [' + str(v.ranks) + '] ' + str(v.problem))); });
  }

  // ---- the wait-for graph ---------------------------------------------------------------
  function graph(dl) {
    var s = section('graph', 'Who waits for whom');
    var waits = arr(dl.waits);
    if (!waits.length) { add(s, el('p', 'empty', 'No rank waits for another in the pending operations read.')); return; }
    var cycleOf = {};
    arr(dl.cycles).forEach(function (cy, ci) { arr(cy.ranks).forEach(function (r) { if (num(r) !== null) cycleOf[r] = ci; }); });
    var cycleSize = arr(dl.cycles).map(function (cy) { return arr(cy.ranks).length; });
    var info = {};  // rank -> {state, call, site}
    waits.forEach(function (w) {
      var r = num(w.rank);
      if (r === null || info[r]) return;
      var st = w.state;
      var state = st && typeof st === 'object' && st.in_cycle ? 'cycle' : st === 'blocked_by_deadlock' ? 'blocked' : 'progressing';
      var b = w.blocked_in || {};
      info[r] = { state: state, call: str(b.call), site: callSiteText(b.call_site, ' at ') };
    });
    function keyOf(r) {
      var i = info[r];
      if (!i) return 'other';
      if (i.state === 'cycle' && cycleOf[r] !== undefined && cycleSize[cycleOf[r]] <= CYCLE_SINGLE) return 'r' + r;
      return i.state + '|' + (i.state === 'cycle' ? cycleOf[r] : '') + '|' + i.call + '|' + i.site;
    }
    var groups = {}, order = [];
    function group(r) {
      var k = keyOf(r);
      if (!groups[k]) {
        var i = info[r] || { state: 'other', call: '', site: '' };
        groups[k] = { key: k, ranks: [], state: i.state, call: i.call, site: i.site };
        order.push(k);
      }
      return groups[k];
    }
    var ranksSeen = {};
    waits.forEach(function (w) { var r = num(w.rank); if (r !== null && !ranksSeen[r]) { ranksSeen[r] = 1; group(r).ranks.push(r); } });
    var edges = {}, edgeOrder = [];
    function edge(a, b, cyc) {
      var ga = group(a), gb = group(b);
      if (ranksSeen[b] === undefined) { ranksSeen[b] = 1; gb.ranks.push(b); }
      var k = ga.key + '>' + gb.key;
      if (!edges[k]) { edges[k] = { from: ga, to: gb, n: 0, cycle: false }; edgeOrder.push(k); }
      edges[k].n++;
      if (cyc) edges[k].cycle = true;
    }
    waits.forEach(function (w) {
      var r = num(w.rank);
      if (r === null) return;
      var t = w.target || {};
      var cyc = info[r] && info[r].state === 'cycle';
      if (t.rank && num(t.rank.rank) !== null) edge(r, t.rank.rank, cyc && cycleOf[t.rank.rank] === cycleOf[r]);
      // A knot (MPI_ANY_SOURCE receives that no candidate can satisfy) is a cycle of OR-waits.
      else if (t.any_source) arr(t.any_source.candidates).slice(0, 256).forEach(function (c) { if (num(c) !== null) edge(r, c, cyc && cycleOf[c] === cycleOf[r]); });
    });
    order.forEach(function (k) { groups[k].ranks.sort(function (a, b) { return a - b; }); });
    var all = order.map(function (k) { return groups[k]; });
    var drawn = all.slice(0, MAX_GROUPS);
    // Layout: each cycle on its own circle, side by side; then a row of the ranks blocked by
    // a cycle; then everything else.
    var W = 170, H = 46, GAP = 28, pos = {}, width = 0, y = 20;
    var byCycle = {};
    drawn.forEach(function (g) { if (g.state === 'cycle') { var c = cycleOf[g.ranks[0]]; (byCycle[c] = byCycle[c] || []).push(g); } });
    var x0 = 20, tallest = 0;
    Object.keys(byCycle).forEach(function (c) {
      var gs = byCycle[c];
      // Adjacent nodes on the circle at least a node's width (plus a gap) apart.
      var R = gs.length === 1 ? 0 : Math.max(70, (W + GAP) / (2 * Math.sin(Math.PI / gs.length)));
      var cx = x0 + R + W / 2, cy = y + R + H / 2;
      gs.forEach(function (g, i) {
        var a = -Math.PI / 2 + 2 * Math.PI * i / gs.length;
        pos[g.key] = [cx + R * Math.cos(a) - W / 2, cy + R * Math.sin(a) - H / 2];
      });
      x0 += 2 * R + W + 2 * GAP;
      tallest = Math.max(tallest, 2 * R + H);
      width = Math.max(width, x0);
    });
    if (tallest) y += tallest + 2 * GAP;
    ['blocked', 'progressing', 'other'].forEach(function (state) {
      var gs = drawn.filter(function (g) { return g.state === state; });
      if (!gs.length) return;
      var perRow = Math.max(1, Math.min(gs.length, 8));
      gs.forEach(function (g, i) {
        pos[g.key] = [20 + (i % perRow) * (W + GAP), y + Math.floor(i / perRow) * (H + GAP)];
      });
      width = Math.max(width, 20 + perRow * (W + GAP));
      y += Math.ceil(gs.length / perRow) * (H + GAP) + GAP;
    });
    var svg = sv('svg', { id: 'waits-graph', width: Math.max(width, 300), height: y + 10, viewBox: '0 0 ' + Math.max(width, 300) + ' ' + (y + 10), role: 'img' });
    var title = sv('title', {});
    title.textContent = 'wait-for graph';
    svg.appendChild(title);
    var defs = sv('defs', {});
    [['arrow', 'edge-arrow'], ['arrow-cycle', 'edge-arrow cycle']].forEach(function (m) {
      var mk = sv('marker', { id: m[0], viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
      mk.appendChild(sv('path', { d: 'M0,0 L10,5 L0,10 z', 'class': m[1] }));
      defs.appendChild(mk);
    });
    svg.appendChild(defs);
    function anchor(g, toward) {
      var p = pos[g.key], c = [p[0] + W / 2, p[1] + H / 2];
      var dx = toward[0] - c[0], dy = toward[1] - c[1];
      if (!dx && !dy) return c;
      var sx = dx ? (W / 2) / Math.abs(dx) : Infinity, sy = dy ? (H / 2) / Math.abs(dy) : Infinity;
      var sc = Math.min(sx, sy);
      return [c[0] + dx * sc, c[1] + dy * sc];
    }
    var edgeLayer = sv('g', { 'class': 'edges' });
    var drawnEdges = 0;
    edgeOrder.forEach(function (k) {
      var e = edges[k];
      if (!pos[e.from.key] || !pos[e.to.key] || drawnEdges >= 4 * MAX_GROUPS) return;
      drawnEdges++;
      var pa = pos[e.from.key], pb = pos[e.to.key];
      var ca = [pa[0] + W / 2, pa[1] + H / 2], cb = [pb[0] + W / 2, pb[1] + H / 2];
      var line;
      if (e.from === e.to) {
        line = sv('path', { d: 'M' + (pa[0] + W - 20) + ',' + pa[1] + ' c 30,-30 50,0 20,' + 18, 'class': 'edge' + (e.cycle ? ' cycle' : ''), fill: 'none' });
      } else {
        var a = anchor(e.from, cb), b = anchor(e.to, ca);
        line = sv('line', { x1: a[0], y1: a[1], x2: b[0], y2: b[1], 'class': 'edge' + (e.cycle ? ' cycle' : '') });
      }
      line.setAttribute('marker-end', e.cycle ? 'url(#arrow-cycle)' : 'url(#arrow)');
      line.setAttribute('data-from', setText(e.from.ranks));
      line.setAttribute('data-to', setText(e.to.ranks));
      var t = sv('title', {});
      t.textContent = 'ranks ' + setText(e.from.ranks) + ' wait for ' + setText(e.to.ranks) + ' (' + plural(e.n, 'operation') + ')';
      line.appendChild(t);
      edgeLayer.appendChild(line);
    });
    svg.appendChild(edgeLayer);
    var nodeLayer = sv('g', { 'class': 'nodes' });
    drawn.forEach(function (g) {
      var p = pos[g.key];
      if (!p) return;
      var ranks = setText(g.ranks);
      var gg = sv('g', { 'class': 'node ' + g.state, transform: 'translate(' + p[0] + ',' + p[1] + ')' });
      gg.setAttribute('data-ranks', ranks);
      gg.appendChild(sv('rect', { width: W, height: H, rx: 6, ry: 6 }));
      var t1 = sv('text', { x: 8, y: 18, 'class': 'n1' });
      t1.textContent = (g.ranks.length === 1 ? 'rank ' : 'ranks ') + clip(ranks, 22) + (g.ranks.length > 1 ? ' (' + g.ranks.length + ')' : '');
      var t2 = sv('text', { x: 8, y: 36, 'class': 'n2' });
      t2.textContent = clip((g.call || (g.state === 'other' ? 'not waiting here' : '')) + g.site, 28);
      var tt = sv('title', {});
      tt.textContent = (g.ranks.length === 1 ? 'rank ' : 'ranks ') + ranks + ': ' + g.state + (g.call ? ', in ' + g.call : '') + g.site;
      gg.appendChild(tt);
      gg.appendChild(t1);
      gg.appendChild(t2);
      nodeLayer.appendChild(gg);
    });
    svg.appendChild(nodeLayer);
    var legend = el('p', 'legend');
    add(legend, el('span', 'key cycle', 'in a cycle'), el('span', 'key blocked', 'blocked by the cycle'),
      el('span', 'key progressing', 'may progress'), el('span', 'key other', 'waited for, not waiting'));
    add(s, legend);
    var wrap = el('div', 'svgwrap');
    wrap.appendChild(svg);
    add(s, wrap);
    var nr = Object.keys(ranksSeen).length;
    add(s, el('p', 'meta', plural(nr, 'rank') + ' in ' + plural(all.length, 'node') + ' (equivalent ranks grouped)' +
      (all.length > MAX_GROUPS ? '; the first ' + MAX_GROUPS + ' drawn' : '')));
  }
  function clip(t, n) { return t.length > n ? t.slice(0, n - 1) + '\u2026' : t; }

  // ---- pending operations ---------------------------------------------------------------
  function opsRows(dl, qd) {
    var rows = [];
    function peerText(p) {
      if (p === 'any') return 'any';
      if (p && typeof p === 'object') return num(p.rank) !== null ? String(p.rank) : str(p.local !== undefined ? 'local ' + p.local : JSON.stringify(p));
      return str(p);
    }
    function lenText(l) {
      if (!l || typeof l !== 'object') return '';
      if (num(l.bytes) !== null) return l.bytes + ' B';
      if (num(l.elements) !== null) return l.elements + ' elem.';
      return '';
    }
    var byRank = {};
    arr(dl && dl.waits).forEach(function (w) {
      if (num(w.rank) === null || byRank[w.rank]) return;
      var b = w.blocked_in || {};
      var st = w.state && typeof w.state === 'object' && w.state.in_cycle ? 'in cycle ' + (num(w.state.in_cycle.cycle) + 1) : str(w.state).replace(/_/g, ' ');
      byRank[w.rank] = [st, str(b.call), callSiteText(b.call_site, '')];
    });
    if (qd) {
      arr(qd.ranks).forEach(function (rk) {
        var why = byRank[rk.rank] || ['', '', ''];
        if (rk.error) rows.push([str(rk.rank), 'not read', '', '', '', '', '', '', str(rk.error)]);
        arr(rk.communicators).forEach(function (c) {
          arr(c.operations).forEach(function (o) {
            rows.push([str(rk.rank), why[0] ? why[0] + ' (' + str(o.status) + ')' : str(o.status), why[1], str(o.class),
              o.any_source ? 'any' : str(o.peer_global !== null && o.peer_global !== undefined ? o.peer_global : o.peer_local),
              o.any_tag ? 'any' : str(o.tag), str(c.name), num(o.length_bytes) !== null ? o.length_bytes + ' B' : num(o.length_elements) !== null ? o.length_elements + ' elem.' : '', why[2]]);
          });
        });
      });
      return rows;
    }
    arr(dl && dl.waits).forEach(function (w) {
      var o = w.op || {}, b = w.blocked_in || {};
      var st = w.state && typeof w.state === 'object' && w.state.in_cycle ? 'in cycle ' + (num(w.state.in_cycle.cycle) + 1) : str(w.state).replace(/_/g, ' ');
      rows.push([str(w.rank), st, str(b.call), str(o.class), peerText(o.peer), o.tag === null || o.tag === undefined ? '' : str(o.tag),
        commText(o.comm), lenText(o.length), callSiteText(b.call_site, '')]);
    });
    arr(dl && dl.not_waiting).forEach(function (nw) {
      arr(nw.operations).forEach(function (o) {
        rows.push([str(nw.rank), 'not waiting', '', str(o.class), peerText(o.peer), str(o.tag), commText(o.comm), lenText(o.length), '']);
      });
    });
    return rows;
  }
  function ops(dl, qd) {
    var s = section('operations', 'Pending operations');
    var rows = opsRows(dl, qd);
    if (!rows.length) { add(s, el('p', 'empty', 'No pending operation in what was read.')); return; }
    var heads = ['rank', 'state', 'blocked in', 'operation', 'peer', 'tag', 'communicator', 'length', 'call site'];
    var tools = el('div', 'tools');
    var f = el('input', 'search');
    f.id = 'ops-filter';
    f.type = 'search';
    f.placeholder = 'Filter: any text, or rank:N';
    f.setAttribute('aria-label', 'filter the operations');
    var status = el('span', 'status');
    status.id = 'ops-status';
    add(tools, f, status);
    add(s, tools);
    var ot = dataTable('ops-table', heads);
    var body = ot.body;
    add(s, ot.table);
    var lows = rows.map(function (r) { return r.join('\u0001').toLowerCase(); });
    function draw() {
      var q = f.value.trim().toLowerCase();
      var m = /^rank:\s*(\d+)$/.exec(q);
      while (body.firstChild) body.removeChild(body.firstChild);
      var count = 0, drawn = 0;
      for (var i = 0; i < rows.length; i++) {
        var ok = !q || (m ? rows[i][0] === m[1] : lows[i].indexOf(q) >= 0);
        if (!ok) continue;
        count++;
        if (drawn >= MAX_ROWS) continue;
        drawn++;
        var tr = el('tr');
        tr.dataset.rank = rows[i][0];
        for (var j = 0; j < rows[i].length; j++) add(tr, el('td', j === 0 ? 'num' : null, rows[i][j]));
        add(body, tr);
      }
      status.textContent = plural(count, 'operation') + (count > drawn ? ' (the first ' + drawn + ' shown; filter to see others)' : '');
    }
    var timer = null;
    f.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(draw, 120); });
    f.addEventListener('keydown', function (e) { if (e.key === 'Enter') { clearTimeout(timer); draw(); } });
    draw();
  }

  // ---- the job and the report itself ----------------------------------------------------
  function job(jd) {
    var s = section('job', 'Job');
    var st = jd.starter || {};
    var dl = el('dl', 'facts');
    function fact(k, v) { if (v === '' || v === null || v === undefined) return; add(dl, el('dt', null, k), el('dd', null, str(v))); }
    fact('starter', (st.pid ? 'pid ' + st.pid + ' ' : '') + str(st.image));
    fact('launcher', st.launcher && typeof st.launcher === 'object' ? JSON.stringify(st.launcher) : st.launcher);
    fact('interface', arr(jd.interfaces).join(', ') || jd.interface);
    fact('ranks', arr(jd.ranks).length);
    fact('nodes', arr(jd.nodes).length);
    add(s, dl);
    var nodes = arr(jd.nodes);
    if (nodes.length) {
      var nt = dataTable('job-nodes', ['node', 'this node', 'ranks']);
      nodes.slice(0, 1000).forEach(function (nd) { add(nt.body, add(el('tr'), el('td', null, str(nd.host)), el('td', null, nd.local ? 'yes' : ''), el('td', 'num', str(nd.ranks)))); });
      add(s, nt.table);
      if (nodes.length > 1000) add(s, el('p', 'note', (nodes.length - 1000) + ' more nodes'));
    }
    var ranks = arr(jd.ranks);
    if (ranks.length) {
      var d = el('details');
      add(d, el('summary', null, 'Ranks (' + ranks.length + ')'));
      var rt = dataTable(null, ['rank', 'node', 'pid', 'executable', 'control']);
      var b2 = rt.body;
      d.addEventListener('toggle', function () {
        if (b2.firstChild || !d.open) return;
        ranks.slice(0, 5000).forEach(function (r) {
          add(b2, add(el('tr'), el('td', 'num', str(r.rank)), el('td', null, str(r.host)), el('td', 'num', str(r.pid)), el('td', null, str(r.executable)), el('td', null, str(r.control))));
        });
      });
      add(d, rt.table);
      add(s, d);
    }
    arr(jd.problems).concat(arr(jd.notes)).forEach(function (n) { add(s, el('p', 'note', typeof n === 'string' ? n : JSON.stringify(n))); });
  }
  function about(d) {
    var s = section('about', 'This report');
    var dl = el('dl', 'facts');
    var tool = d.tool || {};
    add(dl, el('dt', null, 'made by'), el('dd', null, str(tool.name) + ' ' + str(tool.version)));
    var cmd = el('dd');
    add(cmd, el('code', null, arr(d.command).map(function (a) { a = str(a); return /^[\w@%+=:,./-]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'"; }).join(' ')));
    cmd.id = 'command';
    add(dl, el('dt', null, 'command'), cmd);
    add(dl, el('dt', null, 'created'), el('dd', null, str(d.created)));
    var names = [];
    for (var k in docs) if (Object.prototype.hasOwnProperty.call(docs, k)) names.push(str(docs[k] && docs[k].schema));
    add(dl, el('dt', null, 'documents'), el('dd', null, names.join(', ') + ' (embedded in this file, element mpir-data)'));
    add(s, dl);
    var raw = el('details');
    add(raw, el('summary', null, 'The data (JSON)'));
    var pre = el('pre', 'raw');
    raw.addEventListener('toggle', function () { if (raw.open && !pre.firstChild) pre.textContent = JSON.stringify(d, null, 1); });
    add(raw, pre);
    add(s, raw);
  }

  function main() {
    if (!data || typeof data !== 'object' || typeof data.schema !== 'string' || data.schema.indexOf('mpir.report/') !== 0) {
      throw new Error('this file holds no mpir report data');
    }
    docs = data.documents && typeof data.documents === 'object' ? data.documents : {};
    var header = el('header');
    add(header, el('h1', null, 'mpir report'), el('span', 'sub', str(data.created)));
    app.appendChild(header);
    verdict(docs.deadlock || null, docs.stacks || null, arr(data.notes));
    if (docs.stacks) tree(docs.stacks);
    if (docs.deadlock && !docs.deadlock.error) graph(docs.deadlock);
    if (docs.deadlock || docs.queues) ops(docs.deadlock || null, docs.queues || null);
    if (docs.job) job(docs.job);
    about(data);
  }
  try {
    main();
    document.body.setAttribute('data-rendered', 'yes');
  } catch (e) {
    var p = el('p', 'error', 'This report could not be drawn: ' + (e && e.message ? e.message : String(e)));
    p.id = 'report-error';
    app.insertBefore(p, app.firstChild);
    document.body.setAttribute('data-rendered', 'error');
  }
})();
