/* Live temperature: one head's softmax(scores / t) redrawn in the browser while a slider moves.

   Plain JavaScript, no library, no network. In the app it is drawn inside the page itself, not in an iframe
   (ui/live_temperature.py: a v2 component whose small inline loader adds this script to the page once and calls
   LiveTemperature.mount(root, data, send) on every rerun). An iframe per view cost a first visit of the Query
   inspector at 64 tokens about 0.2 s of the page's time (a document to create, its scripts to run).
   `data` is one packed blob (ui.live_temperature.pack):
     "LTP1", uint32 (little-endian) header length, the header (JSON: the arguments, and for each byte array
     its [offset, length] under "buffers", from the arrays' start: the next multiple of 4 after the header),
     the byte arrays (float32 / uint8, 4-byte aligned).
   A release calls send({temperature, nonce}); while the handle moves nothing leaves the browser.
   index.html is the same widget on a page of its own speaking Streamlit's component protocol (API version 1)
   by postMessage (`connect`): the tests and benchmarks/live_temperature.py drive it there, with no server.
     -> {isStreamlitMessage: true, type: "streamlit:componentReady", apiVersion: 1}
     <- {type: "streamlit:render", args: {...}, theme: {...}}      (bytes arguments arrive as Uint8Array)
     -> {isStreamlitMessage: true, type: "streamlit:setFrameHeight", height}
     -> {isStreamlitMessage: true, type: "streamlit:setComponentValue", value, dataType: "json"}

   The math is the core's, step for step and in float32 (Math.fround), so at the released t the
   preview equals the server's softmax to about 1e-7:
     scaled = scores * fround(1 / t)                   (L, S)  the core's scale = 1 / temperature
     masked = scaled with -inf or (+ -1e9) where blocked   (or + a float mask's own values, ``added``)
     logits = masked + bias                            the position bias (ALiBi), where the head has one
     weights = softmax(masked) per row                 a row with every key at -inf: all 0 (the core's rule)
     entropy_i = -sum_j w_ij ln w_ij                   nats, 0 ln 0 = 0, with the float32 weights
*/
(function () {
  "use strict";

  var f32 = Math.fround;
  var VIRIDIS = [
    [0.0, "#440154"], [0.1111, "#482878"], [0.2222, "#3e4989"], [0.3333, "#31688e"], [0.4444, "#26828e"],
    [0.5556, "#1f9e89"], [0.6667, "#35b779"], [0.7778, "#6ece58"], [0.8889, "#b5de2b"], [1.0, "#fde725"],
  ];

  // ---------------------------------------------------------------- the math

  /** Fill out.weights (L*S float32) and out.entropy (L) with softmax(scores * fround(1/t) + added). */
  function softmaxRows(p, t, out) {
    var n = p.n, s = p.s, scores = p.scores, allowed = p.allowed, added = p.added, bias = p.bias;
    var scale = f32(1 / t);
    var leak = p.fill === "-1e9";
    var row = out.row, exps = out.exps, w = out.weights, ent = out.entropy;
    for (var i = 0; i < n; i++) {
      var base = i * s, top = -Infinity, j, x;
      for (j = 0; j < s; j++) {
        x = f32(scores[base + j] * scale); // scaled
        if (added) x = f32(x + added[base + j]); // a float mask, added as it is
        else if (!allowed[base + j]) x = leak ? f32(x - 1e9) : -Infinity; // blocked
        if (bias) x = f32(x + bias[base + j]); // the position bias after masking (-inf stays -inf)
        row[j] = x;
        if (x > top) top = x;
      }
      if (top === -Infinity) { // every key blocked with -inf: attends to nothing, as the core
        for (j = 0; j < s; j++) w[base + j] = 0;
        ent[i] = 0;
        continue;
      }
      var sum = 0;
      for (j = 0; j < s; j++) { x = Math.exp(row[j] - top); exps[j] = x; sum += x; }
      // -w ln w with ln w = (x - top) - ln(sum): one log per row, not per cell. w is the float32 weight,
      // so this differs from -w32 ln w32 by w32 |ln(w32 / w)| < 6e-8 * w32 per cell (< 6e-8 a row).
      var lnSum = Math.log(sum), h = 0;
      for (j = 0; j < s; j++) {
        w[base + j] = exps[j] / sum; // stored as float32, as the core's weights
        x = w[base + j];
        if (x > 0) h -= x * (row[j] - top - lnSum);
      }
      ent[i] = h;
    }
    return out;
  }

  function buffers(n, s) {
    return { weights: new Float32Array(n * s), entropy: new Float64Array(n), row: new Float64Array(s), exps: new Float64Array(s) };
  }

  /** Plain-array version for tests: {weights: [[...]], entropy: [...]} at temperature t. */
  function compute(p, t) {
    var q = decode(p);
    var out = softmaxRows(q, t, buffers(q.n, q.s));
    var weights = [];
    for (var i = 0; i < q.n; i++) weights.push(Array.from(out.weights.subarray(i * q.s, (i + 1) * q.s)));
    return { weights: weights, entropy: Array.from(out.entropy) };
  }

  // ---------------------------------------------------------------- arguments

  function asBytes(v) {
    if (v == null) return null;
    if (v instanceof Uint8Array) return v;
    if (v instanceof ArrayBuffer) return new Uint8Array(v);
    if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    if (Array.isArray(v)) return null;
    return null;
  }

  function floats(v, count) {
    if (v == null) return null;
    if (Array.isArray(v)) return Float32Array.from(v);
    if (v instanceof Float32Array) return v;
    var b = asBytes(v);
    if (!b) return null;
    var copy = new Uint8Array(b.byteLength); // own, aligned buffer (protobuf bytes may sit at any offset)
    copy.set(b);
    var out = new Float32Array(copy.buffer);
    if (count != null && out.length !== count) throw new Error("expected " + count + " floats, got " + out.length);
    return out;
  }

  function flags(v, count) {
    if (v == null) { var all = new Uint8Array(count); all.fill(1); return all; }
    if (Array.isArray(v)) return Uint8Array.from(v, function (a) { return a ? 1 : 0; });
    var b = asBytes(v);
    if (!b || b.length !== count) throw new Error("expected " + count + " mask flags");
    return b;
  }

  /** The render arguments as typed arrays: scores (L*S float32), allowed (L*S 0/1), added and bias or null. */
  function decode(a) {
    var n = a.n | 0, s = (a.s || a.n) | 0;
    return {
      n: n,
      s: s,
      scores: floats(a.scores, n * s),
      allowed: flags(a.allowed, n * s),
      added: floats(a.added, n * s),
      bias: floats(a.bias, n * s),
      fill: a.fill === "-1e9" ? "-1e9" : "-inf",
    };
  }

  // ---------------------------------------------------------------- colours

  function parseColour(c) {
    var m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})/i.exec(c);
    if (m) return [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)];
    m = /rgba?\(\s*([\d.]+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)/i.exec(c);
    if (m) return [+m[1], +m[2], +m[3]];
    return [128, 128, 128];
  }

  function packed(rgb) { // little-endian RGBA in one Uint32 (ImageData's byte order)
    return ((255 << 24) | (Math.round(rgb[2]) << 16) | (Math.round(rgb[1]) << 8) | Math.round(rgb[0])) >>> 0;
  }

  /** 256 packed colours along a plotly colorscale [[position, colour], ...]. */
  function lut(scale) {
    var stops = (scale && scale.length > 1 ? scale : VIRIDIS).map(function (st) { return [+st[0], parseColour(st[1])]; });
    var out = new Uint32Array(256), k = 0;
    for (var i = 0; i < 256; i++) {
      var x = i / 255;
      while (k < stops.length - 2 && x > stops[k + 1][0]) k++;
      var a = stops[k], b = stops[k + 1], f = b[0] > a[0] ? Math.min(Math.max((x - a[0]) / (b[0] - a[0]), 0), 1) : 0;
      out[i] = packed([0, 1, 2].map(function (c) { return a[1][c] + f * (b[1][c] - a[1][c]); }));
    }
    return out;
  }

  // ---------------------------------------------------------------- the widget

  var SLIDER_STEPS = 1000; // positions of the range input; t runs on a log scale between the ends
  var instances = 0;

  function LiveTemperature(root, send) {
    this.root = root;
    this.send = send || function () {};
    this.frames = 0; // draws done (the benchmark counts these)
    this.drawMs = 0; // time spent computing and drawing
    this.scheduled = false;
    this.dragging = false;
    this.pending = null; // nonce of a release the server has not answered yet
    this.serverT = null;
    this.theme = {};
    this.hover = null;
    this.build();
  }

  LiveTemperature.prototype.build = function () {
    var self = this, root = this.root;
    root.innerHTML = "";
    var bar = el("div", "lt-bar");
    var label = el("label", "lt-label");
    label.textContent = "Temperature t";
    this.range = el("input", "lt-range");
    this.range.type = "range";
    this.range.min = "0";
    this.range.max = String(SLIDER_STEPS);
    this.range.step = "1";
    this.range.setAttribute("aria-label", "temperature t (scores are divided by t)");
    label.htmlFor = this.range.id = "lt-range-" + (++instances); // one id per widget: several share a page
    this.value = el("span", "lt-value");
    this.status = el("span", "lt-status");
    bar.append(label, this.range, this.value, this.status);
    this.canvas = el("canvas", "lt-canvas");
    this.info = el("div", "lt-info");
    this.query = el("div", "lt-info");
    root.append(bar, this.canvas, this.info, this.query);
    this.off = document.createElement("canvas");

    this.range.addEventListener("input", function () { self.t = self.tAt(+self.range.value); self.schedule(); });
    this.range.addEventListener("change", function () { self.dragging = false; self.release(); });
    this.range.addEventListener("pointerdown", function () { self.dragging = true; });
    live.add(this);
    listen();
    this.canvas.addEventListener("mousemove", function (ev) { self.hover = self.hit(ev); self.schedule(); });
    this.canvas.addEventListener("mouseleave", function () { self.hover = null; self.schedule(); });
    this.canvas.addEventListener("click", function (ev) {
      var h = self.hit(ev);
      if (h && h.row != null) { self.q = h.row; self.schedule(); }
    });
  };

  // The page's listeners, once for every widget: a view cleared and drawn again makes a new widget, and the old
  // one (its buffers) must not stay reachable from the window. A widget whose root left the page is dropped.
  var live = new Set();
  var listening = false;

  function everyWidget(fn) {
    live.forEach(function (w) { if (w.root.isConnected) fn(w); else live.delete(w); });
  }

  function listen() {
    if (listening) return;
    listening = true;
    window.addEventListener("pointerup", function () { everyWidget(function (w) { w.dragging = false; }); });
    window.addEventListener("resize", function () { everyWidget(function (w) { w.layout(); w.schedule(); }); });
  }

  function el(tag, cls) { var e = document.createElement(tag); e.className = cls; return e; }

  /** New arguments from the server (every rerun of the view). */
  LiveTemperature.prototype.update = function (args, theme) {
    var p = decode(args);
    var sameShape = this.p && this.p.n === p.n && this.p.s === p.s;
    this.p = p;
    if (!sameShape) this.out = buffers(p.n, p.s);
    this.keys = new Float64Array(p.n); // allowed keys per row, for the uniform entropy ln(keys)
    for (var i = 0; i < p.n; i++) {
      var count = 0;
      for (var j = 0; j < p.s; j++) count += p.allowed[i * p.s + j];
      this.keys[i] = count;
    }
    this.labels = (args.labels || []).map(String);
    this.lo = +args.t_min || 0.1;
    this.hi = +args.t_max || 64;
    this.step = +args.step || 0;
    this.dk = +args.d_k || 0;
    this.lut = lut(args.colorscale);
    this.maskColour = packed(parseColour(args.mask_colour || "#8c8c8c"));
    if (theme) this.theme = theme;
    var answered = this.pending != null && args.applied === this.pending;
    if (answered) this.pending = null;
    this.serverT = +args.temperature;
    if (this.t == null || (!this.dragging && this.pending == null)) {
      this.t = this.serverT; // the server's value: the figures on the page show exactly this
      this.range.value = String(this.posOf(this.serverT));
    }
    if (this.q == null || !sameShape || args.query !== this.serverQuery) {
      this.q = Math.min(Math.max(args.query | 0, 0), p.n - 1);
    }
    this.serverQuery = args.query;
    this.layout();
    this.draw();
  };

  /** Show query q's weights (a pick in the Query inspector's box, before the server's rerun: follow.js). */
  LiveTemperature.prototype.show = function (q) {
    if (!this.p || !Number.isInteger(q) || q < 0 || q >= this.p.n || q === this.q) return;
    this.q = q;
    this.draw();
  };

  LiveTemperature.prototype.tAt = function (pos) {
    var a = Math.log(this.lo), b = Math.log(this.hi);
    var t = Math.exp(a + (b - a) * pos / SLIDER_STEPS);
    if (this.step > 0) t = Math.round(t / this.step) * this.step;
    t = Math.min(Math.max(t, this.lo), this.hi);
    return +t.toPrecision(12); // 0.30000000000000004 -> 0.3, the value the server is sent
  };

  LiveTemperature.prototype.posOf = function (t) {
    var a = Math.log(this.lo), b = Math.log(this.hi);
    var x = (Math.log(Math.min(Math.max(t, this.lo), this.hi)) - a) / (b - a);
    return Math.round(x * SLIDER_STEPS);
  };

  LiveTemperature.prototype.release = function () {
    if (this.t === this.serverT) { this.schedule(); return; }
    this.pending = Date.now() + Math.random(); // a fresh value each release, so the same t twice still counts
    this.send({ temperature: this.t, nonce: this.pending });
    this.schedule();
  };

  LiveTemperature.prototype.schedule = function () {
    if (this.scheduled || !this.p) return;
    this.scheduled = true;
    var self = this;
    requestAnimationFrame(function () { self.scheduled = false; self.draw(); });
  };

  // Layout (CSS pixels): [heatmap | entropy strip] on top, the query's weight bars below.
  var STRIP = 72, GAP = 10, TITLE = 16, BARS = 120, LABELS = 46, PAD = 4;

  LiveTemperature.prototype.layout = function () {
    if (!this.p) return;
    var width = Math.max(this.root.clientWidth || 600, 260);
    var heat = Math.max(Math.min(width - STRIP - GAP - 2 * PAD, 380), 120);
    var labels = this.p.s <= 40 ? LABELS : 0;
    var height = TITLE + heat + GAP + TITLE + BARS + labels + PAD;
    var dpr = window.devicePixelRatio || 1;
    this.box = { width: width, heat: heat, x0: PAD, y0: TITLE, barsY: TITLE + heat + GAP + TITLE, labels: labels };
    this.canvas.style.width = width + "px";
    this.canvas.style.height = height + "px";
    if (this.canvas.width !== Math.round(width * dpr) || this.canvas.height !== Math.round(height * dpr)) {
      this.canvas.width = Math.round(width * dpr);
      this.canvas.height = Math.round(height * dpr);
    }
    this.dpr = dpr;
    if (this.off.width !== this.p.s || this.off.height !== this.p.n) {
      this.off.width = this.p.s;
      this.off.height = this.p.n;
    }
    this.image = this.off.getContext("2d").createImageData(this.p.s, this.p.n);
    this.pixels = new Uint32Array(this.image.data.buffer);
    var self = this;
    requestAnimationFrame(function () { self.send(null, document.body.scrollHeight); });
  };

  LiveTemperature.prototype.hit = function (ev) {
    if (!this.box) return null;
    var r = this.canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top, b = this.box;
    var inHeat = x >= b.x0 && x < b.x0 + b.heat + GAP + STRIP && y >= b.y0 && y < b.y0 + b.heat;
    if (inHeat) {
      var row = Math.floor((y - b.y0) / b.heat * this.p.n);
      var col = x < b.x0 + b.heat ? Math.floor((x - b.x0) / b.heat * this.p.s) : null;
      return { row: row, col: col };
    }
    if (y >= b.barsY && y < b.barsY + BARS) {
      var key = Math.floor((x - b.x0) / (b.width - 2 * PAD) * this.p.s);
      if (key >= 0 && key < this.p.s) return { row: null, col: key };
    }
    return null;
  };

  function label(self, i) { var t = self.labels[i]; return "'" + (t == null ? i : t) + "'"; }
  function fmt(x, d) { return Number.isFinite(x) ? x.toFixed(d) : String(x); }

  LiveTemperature.prototype.draw = function () {
    if (!this.p) return;
    var t0 = performance.now();
    var p = this.p, n = p.n, s = p.s, out = softmaxRows(p, this.t, this.out), w = out.weights;
    var b = this.box, ctx = this.canvas.getContext("2d"), text = this.theme.textColor || "#31333f";
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = this.theme.backgroundColor || "#ffffff";
    ctx.fillRect(0, 0, b.width, this.canvas.height / this.dpr);
    ctx.font = "12px " + (this.theme.font || "sans-serif");
    ctx.textBaseline = "alphabetic";

    // the heatmap, one pixel per cell, scaled up without smoothing; blocked cells grey
    var px = this.pixels, lutc = this.lut, allowed = p.allowed, grey = this.maskColour;
    for (var k = 0; k < n * s; k++) {
      px[k] = allowed[k] || w[k] > 0 ? lutc[Math.min(255, (w[k] * 255 + 0.5) | 0)] : grey; // -1e9 leaks show
    }
    this.off.getContext("2d").putImageData(this.image, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.off, b.x0, b.y0, b.heat, b.heat);
    var rowH = b.heat / n;
    ctx.strokeStyle = "#ff4b4b";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(b.x0 - 1, b.y0 + this.q * rowH - 1, b.heat + 2, Math.max(rowH, 1) + 2);
    ctx.fillStyle = text;
    ctx.fillText("softmax(QKᵀ / t), rows = queries, columns = keys", b.x0, 12);

    // the row entropies, bars from 0 to ln(S)
    var sx = b.x0 + b.heat + GAP, lnS = Math.log(s), ent = out.entropy, total = 0, uniform = 0, largest = 0;
    ctx.fillStyle = "rgba(128,128,128,0.18)";
    ctx.fillRect(sx, b.y0, STRIP, b.heat);
    ctx.fillStyle = "#0072B2";
    for (var i = 0; i < n; i++) {
      total += ent[i];
      var big = 0;
      for (var j = 0; j < s; j++) if (w[i * s + j] > big) big = w[i * s + j];
      uniform += Math.log(Math.max(this.keys[i], 1));
      largest += big;
      if (lnS > 0) ctx.fillRect(sx, b.y0 + i * rowH, STRIP * ent[i] / lnS, Math.max(rowH - (rowH > 3 ? 1 : 0), 0.5));
    }
    ctx.fillStyle = text;
    ctx.fillText("entropy", sx, 12);

    // the chosen query's weights over the keys
    var q = this.q, base = q * s, top = 0;
    for (j = 0; j < s; j++) if (w[base + j] > top) top = w[base + j];
    var ymax = top > 0 ? top : 1, bw = (b.width - 2 * PAD) / s, by = b.barsY;
    ctx.fillStyle = text;
    ctx.fillText("query " + q + " " + label(this, q) + ": weight on each key (max " + fmt(top, 3) + ")", b.x0, by - 4);
    ctx.fillStyle = "rgba(128,128,128,0.12)";
    ctx.fillRect(b.x0, by, b.width - 2 * PAD, BARS);
    for (j = 0; j < s; j++) {
      var v = w[base + j], hgt = BARS * v / ymax;
      ctx.fillStyle = allowed[base + j] ? "#0072B2" : "#8c8c8c";
      ctx.fillRect(b.x0 + j * bw + (bw > 3 ? 0.5 : 0), by + BARS - hgt, Math.max(bw - (bw > 3 ? 1 : 0), 0.5), hgt);
    }
    if (b.labels) {
      ctx.save();
      ctx.fillStyle = text;
      ctx.font = "10px " + (this.theme.font || "sans-serif");
      for (j = 0; j < s; j++) {
        ctx.save();
        ctx.translate(b.x0 + (j + 0.5) * bw + 3, by + BARS + 4);
        ctx.rotate(-Math.PI / 3);
        ctx.textAlign = "right";
        ctx.fillText(String(this.labels[j] == null ? j : this.labels[j]).slice(0, 10), 0, 0);
        ctx.restore();
      }
      ctx.restore();
    }

    // words
    var exact = this.t === this.serverT;
    this.value.textContent = "t = " + (this.t < 10 ? this.t.toFixed(2) : this.t.toFixed(1)) +
      (this.dk ? "  (√d_k = " + Math.sqrt(this.dk).toFixed(2) + ")" : "");
    this.status.textContent = this.pending != null ? "recomputing on the server…" :
      exact ? "the server's value: the figures on the page show exactly this" : "preview in your browser; release to recompute";
    this.status.className = "lt-status" + (exact && this.pending == null ? "" : " lt-preview");
    this.info.textContent = "Mean row entropy " + fmt(total / n, 3) + " nats (uniform over the allowed keys: " +
      fmt(uniform / n, 3) + "); mean largest weight " + fmt(largest / n, 3) + ".";
    var order = [];
    for (j = 0; j < s; j++) order.push(j);
    order.sort(function (a, c) { return w[base + c] - w[base + a] || a - c; });
    var hover = "";
    if (this.hover && this.hover.col != null) {
      var r = this.hover.row == null ? q : this.hover.row;
      hover = "  |  query " + r + " " + label(this, r) + " -> key " + this.hover.col + " " + label(this, this.hover.col) +
        ": " + (allowed[r * s + this.hover.col] ? fmt(w[r * s + this.hover.col], 4) : "blocked");
    }
    this.query.textContent = "Largest weights of query " + q + ": " + order.slice(0, 3).map(function (j2) {
      return label(this, j2) + " " + fmt(w[base + j2], 3);
    }, this).join(", ") + hover;
    this.frames++;
    this.drawMs += performance.now() - t0;
  };

  // ---------------------------------------------------------------- Streamlit's protocol

  function post(type, data) {
    var msg = Object.assign({ isStreamlitMessage: true, type: type }, data);
    window.parent.postMessage(msg, "*");
  }

  function connect(root) {
    var height = 0;
    var widget = new LiveTemperature(root, function (value, h) {
      if (value != null) post("streamlit:setComponentValue", { value: value, dataType: "json" });
      if (h != null && h !== height) { height = h; post("streamlit:setFrameHeight", { height: h }); }
    });
    window.addEventListener("message", function (event) {
      var data = event.data;
      if (!data || data.type !== "streamlit:render") return;
      try {
        if (data.theme && data.theme.textColor) document.body.style.color = data.theme.textColor;
        widget.update(data.args || {}, data.theme);
      } catch (err) {
        root.textContent = "The live temperature could not draw: " + err.message;
        post("streamlit:setFrameHeight", { height: 40 });
      }
    });
    post("streamlit:componentReady", { apiVersion: 1 });
    return widget;
  }

  // ---------------------------------------------------------------- in the app's page (a v2 component)

  var MAGIC = "LTP1";
  var textDecoder = new TextDecoder();

  /** A packed payload's header (its JSON) and where its arrays begin; null when `bytes` is not one. */
  function header(bytes) {
    if (bytes.length < 8 || textDecoder.decode(bytes.subarray(0, 4)) !== MAGIC) return null;
    var length = new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, true);
    var base = 8 + length + ((4 - ((8 + length) % 4)) % 4); // the arrays start at the next multiple of 4
    return { args: JSON.parse(textDecoder.decode(bytes.subarray(8, 8 + length))), base: base };
  }

  /** The arguments packed by ui.live_temperature.pack: byte arrays as Uint8Array views into the blob. */
  function unpack(data) {
    var bytes = asBytes(data);
    if (!bytes) return data || {}; // already an object (the tests hand one in)
    var head = header(bytes);
    if (!head) throw new Error("not a packed payload");
    var args = head.args, base = head.base;
    var buffers = args.buffers || {};
    for (var name in buffers) {
      var at = buffers[name];
      args[name] = bytes.subarray(base + at[0], base + at[0] + at[1]);
    }
    delete args.buffers;
    return args;
  }

  /** The page's colours and font where the widget sits (Streamlit's light or dark theme). */
  function pageTheme(root) {
    var own = getComputedStyle(root);
    var app = document.querySelector(".stApp") || document.body;
    var background = getComputedStyle(app).backgroundColor;
    return {
      textColor: own.color,
      backgroundColor: background && background !== "rgba(0, 0, 0, 0)" ? background : "#ffffff",
      font: own.fontFamily,
    };
  }

  /** Draw (first time: build) the widget in `root` with a rerun's packed data; a release calls `send(value)`. */
  function mount(root, data, send) {
    root.__ltSend = send; // the latest rerun's: a release reports through it
    if (!root.__lt) {
      root.__lt = new LiveTemperature(root, function (value) {
        if (value != null && root.__ltSend) root.__ltSend(value);
      });
    }
    // The same bytes as the last rerun's (the view was drawn again around it: a scaling click redraws steps 4-7):
    // nothing to do. Reading the page's theme and the widget's width forced the page's layout in the middle of
    // React's update, and the widget redrew (8-12 ms a click on this machine, profiled).
    var bytes = asBytes(data);
    if (bytes && root.__ltBytes && sameBytes(bytes, root.__ltBytes)) return root.__lt;
    // The same numbers for the query the widget shows already (the box's pick, shown at once: `show`): what
    // `update` would draw is on screen, so only the server's query is noted.
    var query = bytes && root.__ltBytes ? movedTo(bytes, root.__ltBytes) : null;
    if (query !== null && query === root.__lt.q) {
      root.__lt.serverQuery = query;
      root.__ltBytes = bytes;
      return root.__lt;
    }
    root.__lt.update(unpack(data), pageTheme(root));
    root.__ltBytes = bytes;
    return root.__lt;
  }


  /** The query of payload `bytes` when it differs from payload `before` in its query alone, else null. */
  function movedTo(bytes, before) {
    var now = header(bytes), then = header(before);
    if (!now || !then || !Number.isInteger(now.args.query)) return null;
    var query = now.args.query;
    delete now.args.query;
    delete then.args.query;
    if (JSON.stringify(now.args) !== JSON.stringify(then.args)) return null;
    return sameBytes(bytes.subarray(now.base), before.subarray(then.base)) ? query : null;
  }

  function sameBytes(a, b) {
    if (a.length !== b.length) return false;
    for (var i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  window.LiveTemperature = {
    softmaxRows: softmaxRows, compute: compute, decode: decode, unpack: unpack, Widget: LiveTemperature,
    connect: connect, mount: mount,
    widgets: function () { var n = 0; everyWidget(function () { n++; }); return n; }, // those still in the page
  };
})();
