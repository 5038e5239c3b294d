// A viewer's live view of a run, drawn in the browser from the run's live feed
// (core.view.run_screen.feed, served by app_pages/run_screen/feed.py): the server builds one document per
// refresh for every viewer, and this asks for it every data.every_ms with the ETag it has, so an
// unchanged document costs a 304; while steps are timed the document asks for fewer polls (its
// poll_ms: core.view.run_screen.shared_board), so that watching takes less CPU from the race. Everything from the document is set as text, never as HTML.
// When the run ends (or the feed cannot be read) it tells the page, which redraws through Streamlit.

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.async = false;
    script.onload = resolve;
    script.onerror = () => reject(new Error("cannot load " + src));
    document.head.appendChild(script);
  });
}

function chartLibrary(urls) {
  // Once per page: vega, vega-lite, then vega-embed (each needs the one before).
  if (!window.__compileLabVega) {
    window.__compileLabVega = urls.reduce((done, url) => done.then(() => loadScript(url)), Promise.resolve());
    window.__compileLabVega.catch(() => {
      window.__compileLabVega = null;
    });
  }
  return window.__compileLabVega;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function deltaClass(card) {
  const text = String(card.delta || "").trim();
  const down = text.startsWith("-") || text.startsWith("\u2212");
  if (card.delta_color === "off") return "cl-delta off";
  const good = card.delta_color === "inverse" ? down : !down;
  return "cl-delta " + (good ? "good" : "bad");
}

function deltaArrow(card) {
  const text = String(card.delta || "").trim();
  if (card.delta_arrow === "off") return "";
  if (card.delta_arrow === "up") return "\u2191 ";
  if (card.delta_arrow === "down") return "\u2193 ";
  return text.startsWith("-") || text.startsWith("\u2212") ? "\u2193 " : "\u2191 ";
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector(".cl-feed");
  if (!root) {
    root = el("div", "cl-feed");
    parentElement.appendChild(root);
  }
  root.classList.toggle("cl-present", Boolean(data.present));
  const slots = {};
  const views = {};
  let layout = null;
  let stopped = false;
  let timer = null;
  let etag = null;
  let failures = 0;
  let every = data.every_ms;

  function build(names) {
    // The page's order (core.view.run_screen.layout.chart_builders): the race, the cards, then the rest.
    root.replaceChildren();
    for (const key of Object.keys(slots)) delete slots[key];
    const bar = el("div", "cl-progress");
    bar.appendChild(el("div", "cl-progress-fill"));
    slots.progressText = el("p", "cl-progress-text");
    slots.progress = bar;
    slots.error = el("div", "cl-error");
    slots.words = el("div", "cl-words");
    slots.note = el("p", "cl-note");
    slots.cards = el("div", "cl-cards");
    root.append(slots.progressText, bar, slots.error, slots.words, slots.note);
    const chart = (name) => (slots["chart:" + name] = el("div", "cl-chart"));
    if (data.present) {
      // Presenter mode, as the page draws it: the four lead cards, then both charts filling the screen.
      const row = el("div", "cl-row");
      for (const name of names) row.appendChild(chart(name));
      root.append(slots.cards, row);
      return;
    }
    const [first, ...rest] = names;
    root.append(chart(first), slots.cards);
    const pairs = rest.filter((n) => n !== "lead" && n !== "processes");
    if (rest.includes("lead")) root.appendChild(chart("lead"));
    if (rest.includes("processes")) root.appendChild(chart("processes")); // a dot per process
    for (let i = 0; i < pairs.length; i += 2) {
      const row = el("div", "cl-row");
      row.appendChild(chart(pairs[i]));
      if (i + 1 < pairs.length) row.appendChild(chart(pairs[i + 1]));
      else row.appendChild((slots.loss = el("div", "cl-loss")));
      root.appendChild(row);
    }
  }

  async function draw(doc) {
    const names = doc.charts.map((c) => c.name);
    if (layout !== names.join(",")) {
      for (const key of Object.keys(views)) {
        views[key].view.finalize();
        delete views[key];
      }
      build(names);
      layout = names.join(",");
    }
    slots.progressText.textContent = doc.progress_text;
    slots.progress.firstChild.style.width = Math.round(100 * doc.progress) + "%";
    slots.error.textContent = (doc.error ? "Run failed: " + doc.error + " " : "") +
      (doc.damaged ? "Part of this run cannot be read (the store's file is damaged): shown is what can be." : "");
    slots.words.replaceChildren();
    if (doc.words) {
      slots.words.appendChild(el(doc.words.compiling ? "div" : "p", doc.words.compiling ? "cl-info" : "cl-bold", doc.words.text));
    }
    if (doc.waiting) slots.words.appendChild(el("p", "cl-waiting", doc.waiting));
    slots.note.textContent = doc.note || "";
    slots.cards.replaceChildren();
    for (const card of doc.cards) {
      const box = el("div", "cl-card");
      const label = el("div", "cl-label", card.label);
      label.title = card.help || "";
      box.append(label, el("div", "cl-value", card.value));
      if (card.delta) box.appendChild(el("div", deltaClass(card), deltaArrow(card) + card.delta));
      slots.cards.appendChild(box);
    }
    if (slots.loss) {
      slots.loss.replaceChildren();
      if (doc.loss) {
        const p = el("p");
        p.append(el("strong", null, "Loss: "), document.createTextNode(doc.loss));
        slots.loss.appendChild(p);
      }
    }
    await chartLibrary(data.assets);
    for (const chart of doc.charts) {
      const text = JSON.stringify(chart.spec);
      const current = views[chart.name];
      if (current && current.text === text) continue;
      const result = await window.vegaEmbed(slots["chart:" + chart.name], chart.spec, { actions: false, renderer: "svg" });
      if (current) current.view.finalize();
      views[chart.name] = { view: result.view, text };
    }
    root.dataset.eager = String(doc.counts.eager);
    root.dataset.compiled = String(doc.counts.compiled);
  }

  async function poll() {
    if (stopped) return;
    try {
      const response = await fetch(data.url, { cache: "no-store", headers: etag ? { "If-None-Match": etag } : {} });
      if (response.status === 200) {
        const doc = await response.json();
        if (stopped) return;
        await draw(doc);
        etag = response.headers.get("ETag");
        every = doc.poll_ms || data.every_ms;
        failures = 0;
        if (doc.finished) {
          setTriggerValue("ended", doc.status);  // the page redraws with the final result
          return;
        }
      } else if (response.status === 304) {
        failures = 0;
      } else {
        failures += 1;
      }
    } catch (err) {
      failures += 1;
    }
    if (failures >= data.give_up_after) {
      setTriggerValue("unreadable", true);  // the page falls back to refreshing through Streamlit
      return;
    }
    timer = setTimeout(poll, every);
  }

  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
