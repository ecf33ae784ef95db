/* pytest-gym-eval HTML report: the task x repeat grids (filters, sorting, pages) and the rollout drawer.
   Plain JavaScript, no framework, nothing loaded from elsewhere. The data is in the page: #gym-data (drawn
   at once) and #gym-transcripts (a JSON value per line, line i rollout i's transcript, each parsed when its
   rollout is opened). Layouts: see html.py. */
(function () {
  "use strict";

  // A rollout: [nodeid, group, status, reward, failure_class, record, colour, extras, recorded, metrics].
  var NODEID = 0, GROUP = 1, STATUS = 2, REWARD = 3, CLASS = 4, RECORD = 5, COLOUR = 6, EXTRAS = 7, RECORDED = 8,
    METRICS = 9;
  // Task flags, as html.py sets them.
  var FLAGS = { all: 0, failed: 1, errored: 2, flaky: 4, flipped: 8, dropped: 16 };

  var data = JSON.parse(document.getElementById("gym-data").textContent);
  var rollouts = data.rollouts;
  var pageSize = data.page_size;
  var transcripts = null;
  var drawer = document.getElementById("drawer");
  var openCell = null;

  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function short(value) {
    // A reward in a cell: 1, 0, .75, 37.5 (as html.py's _short, without the leading zero).
    if (value === null || value === undefined) return "?";
    var text = Math.abs(value) >= 1000 ? value.toPrecision(3) : String(Math.round(value * 100) / 100);
    return text.replace(/^(-?)0\./, "$1.");
  }

  function number(value) {
    return value === null || value === undefined ? "n/a" : value.toFixed(2);
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // --- Grids -------------------------------------------------------------------------------------------

  function Grid(section, group) {
    this.section = section;
    this.group = group;
    this.filter = "all";
    this.sort = group.baseline ? "drop" : "order";
    this.query = "";
    this.page = 0;
    this.body = section.querySelector(".grid-body");
    this.range = section.querySelector(".pager .range");
    this.prev = section.querySelector(".pager .prev");
    this.next = section.querySelector(".pager .next");
    section.querySelector(".sort").value = this.sort;
    var self = this;
    section.querySelectorAll(".filters button").forEach(function (button) {
      button.addEventListener("click", function () {
        self.filter = button.getAttribute("data-filter");
        section.querySelectorAll(".filters button").forEach(function (other) {
          other.setAttribute("aria-pressed", other === button ? "true" : "false");
        });
        self.page = 0;
        self.render();
      });
    });
    section.querySelector(".sort").addEventListener("change", function (event) {
      self.sort = event.target.value;
      self.page = 0;
      self.render();
    });
    section.querySelector(".search").addEventListener("input", function (event) {
      self.query = event.target.value.trim().toLowerCase();
      self.page = 0;
      self.render();
    });
    this.prev.addEventListener("click", function () { self.page -= 1; self.render(); });
    this.next.addEventListener("click", function () { self.page += 1; self.render(); });
  }

  Grid.prototype.tasks = function () {
    var flag = FLAGS[this.filter] || 0;
    var query = this.query;
    var chosen = this.group.tasks.filter(function (task) {
      return (!flag || task.f & flag) && (!query || task.id.toLowerCase().indexOf(query) !== -1);
    });
    var order = this.group.tasks;
    var index = new Map(order.map(function (task, i) { return [task, i]; }));
    function byValue(value, nullsFirst) {
      return function (a, b) {
        var x = value(a), y = value(b);
        if (x === null || y === null) {
          if (x === y) return index.get(a) - index.get(b);
          return (x === null) === nullsFirst ? -1 : 1;
        }
        return x - y || index.get(a) - index.get(b);
      };
    }
    if (this.sort === "low") chosen.sort(byValue(function (t) { return t.m; }, true));
    else if (this.sort === "high") chosen.sort(byValue(function (t) { return t.m === null ? null : -t.m; }, false));
    else if (this.sort === "drop") {
      chosen.sort(byValue(function (t) { return t.m === null || t.b === null ? null : t.m - t.b; }, false));
    } else if (this.sort === "id") chosen.sort(function (a, b) { return a.id < b.id ? -1 : a.id > b.id ? 1 : 0; });
    return chosen;
  };

  Grid.prototype.render = function () {
    var group = this.group;
    var tasks = this.tasks();
    var pages = Math.max(1, Math.ceil(tasks.length / pageSize));
    this.page = Math.min(Math.max(this.page, 0), pages - 1);
    var first = this.page * pageSize;
    var shown = tasks.slice(first, first + pageSize);
    this.range.textContent = tasks.length
      ? "tasks " + (first + 1).toLocaleString("en") + "–" + (first + shown.length).toLocaleString("en") +
        " of " + tasks.length.toLocaleString("en")
      : "no task";
    this.prev.disabled = this.page === 0;
    this.next.disabled = this.page >= pages - 1;
    if (!shown.length) {
      this.body.innerHTML = '<p class="empty">No task matches.</p>';
      return;
    }
    var html = ['<table class="grid"><thead><tr><th>task</th><th>repeats r0…r' + (group.repeats - 1) +
      '</th><th class="num">mean</th>'];
    if (group.baseline) html.push('<th class="num">baseline</th><th class="num">change</th>');
    html.push("<th></th></tr></thead><tbody>");
    for (var t = 0; t < shown.length; t++) {
      var task = shown[t];
      html.push('<tr data-task="' + esc(task.id) + '"' + (task.f & FLAGS.flaky ? ' class="flaky"' : "") +
        '><th scope="row" class="task" title="' + esc(task.id) + '">' + esc(task.id) + '</th><td><div class="cells">');
      for (var c = 0; c < task.c.length; c++) html.push(cell(task.c[c], c));
      html.push('</div></td><td class="num mean">' + number(task.m) + "</td>");
      if (group.baseline) {
        var change = task.m === null || task.b === null ? null : task.m - task.b;
        var sign = change === null ? "" : change < 0 ? " neg" : change > 0 ? " pos" : "";
        html.push('<td class="num">' + number(task.b) + '</td><td class="num change' + sign + '">' +
          (change === null ? "n/a" : (change > 0 ? "+" : "") + change.toFixed(2)) + "</td>");
      }
      html.push('<td class="tags">' + tags(task.f) + "</td></tr>");
    }
    html.push("</tbody></table>");
    this.body.innerHTML = html.join("");
  };

  function cell(index, repeat) {
    if (index < 0) return '<span class="cell none" title="r' + repeat + ': not run"></span>';
    var rollout = rollouts[index];
    var status = rollout[STATUS];
    var label = rollout[NODEID] + ": " + (status === "error"
      ? "error (" + (rollout[CLASS] || "unknown") + ")"
      : "reward " + short(rollout[REWARD]) + ", " + status);
    if (rollout[RECORDED]) label += ", flipped (recorded " + rollout[RECORDED].join(", ") + ")";
    var text = status === "error" ? "!" : short(rollout[REWARD]);
    var colour = status === "error" ? "error" : "c" + rollout[COLOUR];
    return '<button type="button" class="cell ' + colour + '" data-i="' + index + '" data-status="' + status +
      '" data-nodeid="' + esc(rollout[NODEID]) + '" title="' + esc(label) + '" aria-label="' + esc(label) + '">' +
      esc(text) + "</button>";
  }

  function tags(flags) {
    var out = "";
    if (flags & FLAGS.flaky) out += '<span class="tag flaky">flaky</span>';
    if (flags & FLAGS.errored) out += '<span class="tag errored">error</span>';
    if (flags & FLAGS.flipped) out += '<span class="tag flipped">flipped</span>';
    if (flags & FLAGS.dropped) out += '<span class="tag dropped">dropped</span>';
    return out;
  }

  // --- The drawer: one rollout ------------------------------------------------------------------------

  var parsed = {};

  function transcriptOf(index) {
    if (transcripts === null) {
      transcripts = document.getElementById("gym-transcripts").textContent.split("\n");
    }
    if (!(index in parsed)) {
      parsed[index] = transcripts[index] ? JSON.parse(transcripts[index]) : null;
    }
    return parsed[index];
  }

  function facts(pairs) {
    var list = el("dl", "facts");
    pairs.forEach(function (pair) {
      if (pair[1] === null || pair[1] === undefined || pair[1] === "") return;
      list.appendChild(el("dt", "", pair[0]));
      var value = pair[1] instanceof Node ? pair[1] : el("dd", "", pair[1]);
      if (pair[1] instanceof Node) {
        var dd = el("dd");
        dd.appendChild(value);
        list.appendChild(dd);
      } else list.appendChild(value);
    });
    return list;
  }

  function keyValues(object) {
    var list = el("dl", "kv");
    Object.keys(object).forEach(function (key) {
      list.appendChild(el("dt", "", key));
      list.appendChild(el("dd", "", object[key] === null ? "null" : object[key]));  // a null is what the verifier recorded
    });
    return list;
  }

  function box(className, title) {
    var node = el("div", "box " + className);
    node.appendChild(el("h3", "", title));
    return node;
  }

  function usageText(usage) {
    var parts = [];
    var source = usage || {};
    ["input_tokens", "output_tokens", "total_tokens", "reasoning_tokens", "cached_tokens",
      "prompt_tokens", "completion_tokens"].forEach(function (key) {
      if (source[key] !== undefined) parts.push(key.replace("_tokens", "") + " " + source[key].toLocaleString("en"));
    });
    return parts.length ? parts.join(", ") : null;
  }

  function turn(item, isFinal) {
    var kind = item.kind;
    var node = el("div", "turn " + (kind === "message" ? item.role : kind) + (isFinal ? " final" : ""));
    if (kind === "message") {
      node.appendChild(el("div", "who", item.role + (isFinal ? " · final output" : "")));
      node.appendChild(el("pre", "text", item.text || "(no text)"));
    } else if (kind === "tool_call") {
      node.appendChild(el("div", "who", "tool call · " + item.name + (item.call_id ? " · " + item.call_id : "")));
      node.appendChild(el("pre", "text", item.arguments));
    } else if (kind === "tool_result") {
      node.appendChild(el("div", "who", "tool result" + (item.call_id ? " · " + item.call_id : "")));
      node.appendChild(el("pre", "text", item.text));
    } else if (kind === "reasoning") {
      var details = el("details");
      details.appendChild(el("summary", "who", "reasoning"));
      details.appendChild(el("pre", "text", item.text || "(no text)"));
      node.appendChild(details);
    } else {
      node.appendChild(el("div", "who", item.type));
      node.appendChild(el("pre", "text", item.text));
    }
    return node;
  }

  // One rollout's facts, answer, verifier and conversation, into body (the drawer's, or a policy comparison's column).
  function fill(body, index) {
    var rollout = rollouts[index];
    var group = data.groups[rollout[GROUP]];
    var script = transcriptOf(index);
    var extras = rollout[EXTRAS] || {};
    body.textContent = "";
    var status = el("span", "status " + rollout[STATUS], rollout[STATUS]);
    var reward = rollout[STATUS] === "error" ? "none (an error has no reward)"
      : String(rollout[REWARD]) + " (pass threshold " + group.threshold + ")";
    var other = {};
    var cause = {};  // text fields of an errored rollout (a cause line) belong with its error
    Object.keys(extras).forEach(function (key) {
      if (/tokens$/.test(key)) return;
      if (rollout[STATUS] === "error" && typeof extras[key] === "string") cause[key] = extras[key];
      else other[key] = extras[key];
    });
    var usage = usageText(script && script.usage);
    if (!usage) {
      var own = {};
      Object.keys(extras).forEach(function (key) { if (/tokens$/.test(key)) own[key] = extras[key]; });
      usage = usageText(own);
    }
    body.appendChild(facts([
      ["status", status],
      ["reward", reward],
      ["failure class", rollout[CLASS]],
      ["recorded reward", rollout[RECORDED] ? rollout[RECORDED].join(", ") + " (the reward flipped)" : null],
      ["tokens", usage],
      ["record", rollout[RECORD]],
    ]));
    if (Object.keys(other).length) body.appendChild(keyValues(other));
    if (rollout[METRICS]) {  // [[name, value, reason or null], ...]: what the test functions recorded, and why
      var metrics = box("metrics", "Custom metrics");
      var list = el("dl", "kv");
      rollout[METRICS].forEach(function (metric) {
        list.appendChild(el("dt", "", metric[0]));
        list.appendChild(el("dd", "", String(metric[1]) + (metric[2] ? " \u2014 " + metric[2] : "")));
      });
      metrics.appendChild(list);
      body.appendChild(metrics);
    }
    if (rollout[STATUS] === "error") {
      var failure = box("failure", "Error: " + (rollout[CLASS] || "unknown"));
      if (Object.keys(cause).length) failure.appendChild(keyValues(cause));
      if (script && script.failure) failure.appendChild(keyValues(script.failure));
      else if (!rollout[RECORD]) {
        failure.appendChild(el("p", "", "Gym wrote no record for this rollout" +
          (document.querySelector(".note.run-failed") ? ": see why Gym's run failed, at the top." : ".")));
      }
      body.appendChild(failure);
    }
    if (!script) {
      body.appendChild(el("p", "empty", rollout[RECORD]
        ? "No transcript: the record could not be read when this page was made (see the note at the top)."
        : "No transcript: there is no record of this rollout."));
    } else {
      var answer = box("answer", "Answer");
      var finalText = script.final === null ? null : script.items[script.final].text;
      answer.appendChild(facts([["expected", script.expected]]));
      var output = el("pre", "text final-output", finalText === null ? "(the model gave no text)" : finalText);
      answer.appendChild(el("div", "who", "final output"));
      answer.appendChild(output);
      body.appendChild(answer);
      if (Object.keys(script.verifier).length) {
        var verifier = box("verifier", "Verifier recorded");
        verifier.appendChild(keyValues(script.verifier));
        body.appendChild(verifier);
      }
      var conversation = box("conversation", "Conversation" +
        (script.tools.length ? " (tools: " + script.tools.join(", ") + ")" : ""));
      script.items.forEach(function (item, i) {
        if (i === script.output_from) conversation.appendChild(el("div", "divider", "the model's turns"));
        conversation.appendChild(turn(item, i === script.final));
      });
      if (!script.items.length) conversation.appendChild(el("p", "empty", "No messages."));
      body.appendChild(conversation);
    }
  }

  function open(index, source) {
    var rollout = rollouts[index];
    if (!rollout) return;
    drawer.querySelector(".drawer-title").textContent = rollout[NODEID];
    var body = drawer.querySelector(".drawer-body");
    drawer.setAttribute("data-i", String(index));
    drawer.setAttribute("data-status", rollout[STATUS]);
    fill(body, index);
    if (openCell) openCell.classList.remove("open");
    openCell = source && source.classList.contains("cell") ? source : null;
    if (openCell) openCell.classList.add("open");
    drawer.hidden = false;
    document.body.classList.add("drawer-open");
    drawer.scrollTop = 0;
    body.scrollTop = 0;
    try {
      history.replaceState(null, "", "#rollout=" + encodeURIComponent(rollout[NODEID]));
    } catch (error) {
      // A file:// page may refuse; the link is a convenience only.
    }
  }

  function close() {
    drawer.hidden = true;
    document.body.classList.remove("drawer-open");
    drawer.removeAttribute("data-i");
    if (openCell) {
      openCell.classList.remove("open");
      openCell.focus();
      openCell = null;
    }
    try {
      history.replaceState(null, "", location.pathname + location.search);
    } catch (error) {
      // As above.
    }
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest("[data-i]");
    if (target && (target.classList.contains("cell") || target.classList.contains("open-rollout"))) {
      open(Number(target.getAttribute("data-i")), target);
    }
  });
  drawer.querySelector(".close").addEventListener("click", close);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && !drawer.hidden) close();
  });

  // --- Start ------------------------------------------------------------------------------------------

  document.querySelectorAll(".gym-group").forEach(function (section) {
    var group = data.groups[Number(section.getAttribute("data-group"))];
    new Grid(section, group).render();
  });
  // A link to one rollout (#rollout=NODEID) opens it once the transcripts below this script are parsed.
  document.addEventListener("DOMContentLoaded", function () {
    // The policies compared: both transcripts of each task that flips, side by side; a folded task's when opened.
    document.querySelectorAll(".policy-flip").forEach(function (flip) {
      function draw() {
        if (!flip.open || flip.hasAttribute("data-drawn")) return;
        flip.setAttribute("data-drawn", "1");
        flip.querySelectorAll(".policy-transcript[data-i]").forEach(function (column) {
          var index = Number(column.getAttribute("data-i"));
          if (rollouts[index]) fill(column, index);
        });
      }
      flip.addEventListener("toggle", draw);
      draw();
    });
    if (location.hash.indexOf("#rollout=") !== 0) return;
    var wanted = decodeURIComponent(location.hash.slice(9));
    for (var i = 0; i < rollouts.length; i++) {
      if (rollouts[i][NODEID] === wanted) {
        open(i, null);
        break;
      }
    }
  });
  performance.mark("gym-first-render");
  document.documentElement.setAttribute("data-rendered", "1");
})();
