// The console's script: live updates by server-sent events. Pages are
// rendered on the server; this swaps in fresh parts of them and appends a
// cell's lines as text. It never builds markup from data.
"use strict";
(function () {
  const prefix = document.querySelector('meta[name="codemode-prefix"]').content;
  const page = document.body.dataset.page;
  const live = document.getElementById("live");

  for (const el of document.querySelectorAll("[data-back]")) el.value = location.pathname;

  // fresh fetches this page again and returns its content section.
  async function fresh() {
    const u = new URL(location.href);
    u.searchParams.delete("flash");
    u.searchParams.delete("error");
    u.searchParams.set("fragment", "");
    const res = await fetch(u, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!res.ok) throw new Error("HTTP " + res.status);
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    for (const el of doc.querySelectorAll("[data-back]")) el.value = location.pathname;
    return doc.querySelector("section");
  }

  // later runs f at most once per wait, after the last call within it.
  function later(f, wait) {
    let t = null;
    return () => {
      if (t !== null) return;
      t = setTimeout(() => { t = null; f().catch(() => {}); }, wait);
    };
  }

  const updaters = {
    // Questions: drop the answered ones and add the new ones, leaving the
    // forms a person is filling in alone.
    questions: later(async () => {
      const now = await fresh();
      const mine = document.getElementById("questions");
      if (!now || !mine) return;
      const want = new Map([...now.querySelectorAll("article.question")].map((a) => [a.dataset.run, a]));
      for (const a of mine.querySelectorAll("article.question")) {
        if (!want.has(a.dataset.run)) a.remove();
      }
      const have = new Set([...mine.querySelectorAll("article.question")].map((a) => a.dataset.run));
      for (const [id, a] of want) {
        if (!have.has(id)) mine.appendChild(document.adoptNode(a));
      }
      const none = mine.querySelector("#no-questions");
      if (want.size > 0 && none) none.remove();
      if (want.size === 0 && !none) {
        const p = document.createElement("p");
        p.className = "none";
        p.id = "no-questions";
        p.textContent = "No run is waiting for an answer.";
        mine.appendChild(p);
      }
    }, 150),
    list: later(async () => {
      const now = await fresh();
      const mine = document.querySelector("section[data-live]");
      if (now && mine) mine.replaceWith(document.adoptNode(now));
    }, 500),
    run: later(async () => {
      const now = await fresh();
      const mine = document.getElementById("run");
      if (!now || !mine) return;
      const lines = mine.querySelector("#cell-lines");
      const theirs = now.querySelector("#cell-lines");
      if (lines && theirs) theirs.replaceWith(lines);
      const state = mine.querySelector("#cell-state");
      const theirState = now.querySelector("#cell-state");
      if (state && theirState) theirState.replaceWith(state);
      mine.replaceWith(document.adoptNode(now));
    }, 200),
  };

  function onChanges(list) {
    if (page === "questions") {
      const shown = new Set([...document.querySelectorAll("article.question")].map((a) => a.dataset.run));
      if (list === null || list.some((c) => c.kind === "asking" || c.kind === "answered" || shown.has(c.id))) updaters.questions();
    } else if (page === "runs" || page === "cells") {
      updaters.list();
    } else if (page === "run") {
      const id = document.getElementById("run")?.dataset.run;
      if (list === null || list.some((c) => c.id === id)) updaters.run();
    }
  }

  if (window.EventSource) {
    const es = new EventSource(prefix + "events");
    // Whatever changed before the stream opened (or while it was down)
    // was not told: look again once it is open.
    es.onopen = () => {
      live.className = "on";
      live.title = "live updates: on";
      if (page !== "run" || document.getElementById("run")?.hasAttribute("data-following")) onChanges(null);
    };
    es.onerror = () => { live.className = "off"; live.title = "live updates: reconnecting"; };
    es.addEventListener("changes", (e) => onChanges(JSON.parse(e.data)));
    es.addEventListener("reload", () => onChanges(null));
  }

  // A cell's lines, as the cell prints them.
  const pre = document.getElementById("cell-lines");
  if (pre && window.EventSource) {
    const state = document.getElementById("cell-state");
    const seen = new Set();
    const lines = new EventSource(pre.dataset.lines);
    const add = (text, cls) => {
      const s = document.createElement("span");
      if (cls) s.className = cls;
      s.textContent = text + "\n";
      pre.appendChild(s);
    };
    lines.addEventListener("line", (e) => {
      const l = JSON.parse(e.data);
      if (seen.has(l.seq)) return;
      seen.add(l.seq);
      add(l.text, l.handedOut ? "handed" : "");
    });
    lines.addEventListener("park", (e) => {
      const l = JSON.parse(e.data);
      if (seen.has(l.seq)) return;
      seen.add(l.seq);
      add("— parked at step " + l.step + ": waiting for answers —", "event");
    });
    lines.addEventListener("end", () => {
      lines.close();
      add("— the cell ended —", "event");
      if (state) state.textContent = "The cell ended.";
    });
  }
})();
