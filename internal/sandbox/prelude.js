// The guest half of the sandbox. It is evaluated once in every fresh
// instance, before any program, as a function of two host functions:
// `host(op, ...args)` and `hostCall(pathId, json)` for tool calls. It captures the intrinsics it relies on (programs
// may rewrite globals and prototypes), closes code generation, installs
// console and timers, and returns the control object the Go side calls.
(function (host, hostCall) {
  "use strict";
  // Host operations (the first argument of host); run.go's host matches.
  const OP_LOG = 1, OP_TIMER = 2, OP_CLEAR_TIMER = 3, OP_CANCEL = 4, OP_CHILDREN = 5, OP_URL = 6, OP_PATH = 7, OP_FAILURE = 8;
  const G = globalThis;
  const O = Object;
  const { defineProperty, getPrototypeOf, setPrototypeOf, freeze, create, keys: objectKeys, getOwnPropertyDescriptor } = O;
  const hasOwn = O.hasOwn;
  const R = Reflect;
  const apply = R.apply;
  // uncurry(f)(self, ...args) calls f with this = self. A bound `call`
  // costs a fifth of an arrow that spreads into Reflect.apply, and later
  // changes to Function.prototype cannot reach it.
  const functionCall = Function.prototype.call;
  const functionBind = Function.prototype.bind;
  const uncurry = (f) => apply(functionBind, functionCall, [f]);
  const ArrayIsArray = Array.isArray;
  const arrayPush = uncurry(Array.prototype.push);
  const arrayJoin = uncurry(Array.prototype.join);
  const arraySlice = uncurry(Array.prototype.slice);
  const arrayMap = uncurry(Array.prototype.map);
  const arraySort = uncurry(Array.prototype.sort);
  const stringSlice = uncurry(String.prototype.slice);
  const stringReplace = uncurry(String.prototype.replace);
  const stringRepeat = uncurry(String.prototype.repeat);
  const stringIncludes = uncurry(String.prototype.includes);
  const stringIndexOf = uncurry(String.prototype.indexOf);
  const stringSplit = uncurry(String.prototype.split);
  const stringToString = uncurry(String.prototype.toString);
  const regexpTest = uncurry(RegExp.prototype.test);
  const regexpToString = uncurry(RegExp.prototype.toString);
  const numberToString = uncurry(Number.prototype.toString);
  const numberToFixed = uncurry(Number.prototype.toFixed);
  const booleanValueOf = uncurry(Boolean.prototype.valueOf);
  const bigintToString = uncurry(BigInt.prototype.toString);
  const symbolToString = uncurry(Symbol.prototype.toString);
  const dateToISOString = uncurry(Date.prototype.toISOString);
  const dateGetTime = uncurry(Date.prototype.getTime);
  const dateToString = uncurry(Date.prototype.toString);
  const dateToTimeString = uncurry(Date.prototype.toTimeString);
  const errorToString = uncurry(Error.prototype.toString);
  const functionToString = uncurry(Function.prototype.toString);
  const objectToString = uncurry(O.prototype.toString);
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const StringCtor = String;
  const NumberCtor = Number;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const PromiseCtor = Promise;
  const promiseThen = uncurry(Promise.prototype.then);
  const promiseResolve = apply(functionBind, Promise.resolve, [PromiseCtor]);
  const promiseReject = apply(functionBind, Promise.reject, [PromiseCtor]);
  const originalRace = Promise.race;
  const MapCtor = Map;
  const mapGet = uncurry(Map.prototype.get);
  const mapSet = uncurry(Map.prototype.set);
  const mapHas = uncurry(Map.prototype.has);
  const mapDelete = uncurry(Map.prototype.delete);
  const mapEntries = uncurry(Map.prototype.entries);
  const mapSize = uncurry(getOwnPropertyDescriptor(Map.prototype, "size").get);
  const setSize = uncurry(getOwnPropertyDescriptor(Set.prototype, "size").get);
  const setValues = uncurry(Set.prototype.values);
  const iterNext = (it) => it.next();
  const WeakMapCtor = WeakMap;
  const weakGet = uncurry(WeakMap.prototype.get);
  const weakSet = uncurry(WeakMap.prototype.set);
  const weakHas = uncurry(WeakMap.prototype.has);
  const ProxyCtor = Proxy;
  const isNaNf = NumberCtor.isNaN;
  const MathFloor = Math.floor;
  const MathAbs = Math.abs;
  const MathMin = Math.min;
  const MathMax = Math.max;
  const ArrayBufferIsView = ArrayBuffer.isView;
  const typedArrayProto = getPrototypeOf(Uint8Array.prototype);
  const typedArrayLength = uncurry(getOwnPropertyDescriptor(typedArrayProto, "length").get);
  const typedArrayTag = uncurry(getOwnPropertyDescriptor(typedArrayProto, Symbol.toStringTag).get);
  const SymbolIterator = Symbol.iterator;
  const SymbolToStringTag = Symbol.toStringTag;

  const objectPrototype = O.prototype;
  const arrayPrototype = Array.prototype;
  const isPromise = (v) => { try { return v instanceof PromiseCtor; } catch { return false; } };
  const isError = (v) => { try { return v instanceof ErrorCtor; } catch { return false; } };

  // ---- Lockdown: no code generation, no shared memory, no engine extras.

  const refuse = (what) => function () {
    throw new TypeErrorCtor(what + " is not available: programs cannot generate code");
  };
  const lockConstructor = (proto, name) => {
    const ctor = refuse(name);
    defineProperty(ctor, "prototype", { value: proto, writable: false, enumerable: false, configurable: false });
    defineProperty(ctor, "name", { value: name });
    defineProperty(proto, "constructor", { value: ctor, writable: false, enumerable: false, configurable: false });
    return ctor;
  };
  const FunctionProto = Function.prototype;
  const LockedFunction = lockConstructor(FunctionProto, "Function");
  lockConstructor(getPrototypeOf(async function () {}), "AsyncFunction");
  lockConstructor(getPrototypeOf(function* () {}), "GeneratorFunction");
  lockConstructor(getPrototypeOf(async function* () {}), "AsyncGeneratorFunction");
  defineProperty(G, "Function", { value: LockedFunction, writable: true, enumerable: false, configurable: true });

  // Error.prepareStackTrace hands a formatter the stack's CallSites, whose
  // getFunction() returns each frame's function: the prelude's own
  // closures (and the host function) when the stack passes through them.
  // As V8 does for strict code, getFunction answers undefined.
  {
    const saved = ErrorCtor.prepareStackTrace;
    let sites;
    ErrorCtor.prepareStackTrace = (e, cs) => { sites = cs; return ""; };
    void new ErrorCtor().stack;
    ErrorCtor.prepareStackTrace = saved;
    if (sites && sites.length > 0) {
      defineProperty(getPrototypeOf(sites[0]), "getFunction", {
        value: { getFunction() { return undefined; } }.getFunction,
        writable: false, enumerable: false, configurable: false,
      });
    }
  }
  for (const name of ["eval", "SharedArrayBuffer", "Atomics", "WebAssembly", "InternalError"]) {
    delete G[name];
  }

  // ---- Node's Date rendering (the engine leaves off the zone name).

  const UTC_NAME = " (Coordinated Universal Time)";
  const withZoneName = (s) => (s === "Invalid Date" ? s : s + UTC_NAME);
  defineProperty(Date.prototype, "toString", {
    value: { toString() { return withZoneName(dateToString(this)); } }.toString,
    writable: true, enumerable: false, configurable: true,
  });
  defineProperty(Date.prototype, "toTimeString", {
    value: { toTimeString() { return withZoneName(dateToTimeString(this)); } }.toTimeString,
    writable: true, enumerable: false, configurable: true,
  });

  // ---- inspect: node's util.format rendering for console lines (a subset).

  const quote = (s) => {
    let q = "'";
    if (stringIncludes(s, "'")) q = !stringIncludes(s, '"') ? '"' : !stringIncludes(s, "`") ? "`" : "'";
    let out = "";
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      const code = c.charCodeAt(0);
      if (c === q || c === "\\") out += "\\" + c;
      else if (c === "\n") out += "\\n";
      else if (c === "\t") out += "\\t";
      else if (c === "\r") out += "\\r";
      else if (code < 0x20 || code === 0x7f) out += "\\x" + stringSlice("0" + numberToString(code, 16), -2);
      else out += c;
    }
    return q + out + q;
  };
  const identRe = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const formatKey = (k) => (typeof k === "symbol" ? "[" + symbolToString(k) + "]" : regexpTest(identRe, k) ? k : quote(k));
  const formatNumber = (n) => (n === 0 && 1 / n < 0 ? "-0" : StringCtor(n));
  const fnName = (f) => {
    let n = "";
    try { n = f.name; } catch {}
    return typeof n === "string" ? n : "";
  };
  const isClass = (f) => {
    try { return regexpTest(/^class[\s{]/, functionToString(f)); } catch { return false; }
  };
  const ctorName = (v) => {
    try {
      let p = getPrototypeOf(v);
      while (p) {
        const d = getOwnPropertyDescriptor(p, "constructor");
        if (d && typeof d.value === "function" && typeof d.value.name === "string" && d.value.name !== "") return d.value.name;
        p = getPrototypeOf(p);
      }
    } catch {}
    return null;
  };

  // As node's util.inspect: strings inside a value show their first
  // 10,000 characters (so a huge one costs nothing to describe).
  const MAX_STRING = 10000;
  const quoteShort = (s) => {
    if (s.length <= MAX_STRING) return quote(s);
    const rest = s.length - MAX_STRING;
    return quote(stringSlice(s, 0, MAX_STRING)) + "... " + rest + " more character" + (rest > 1 ? "s" : "");
  };

  function inspect(value, depth, seen, indent) {
    switch (typeof value) {
      case "string": return depth === 0 ? value : quoteShort(value);
      case "number": return formatNumber(value);
      case "bigint": return bigintToString(value) + "n";
      case "boolean": return value ? "true" : "false";
      case "undefined": return "undefined";
      case "symbol": return symbolToString(value);
    }
    if (value === null) return "null";
    return inspectObject(value, depth, seen, indent);
  }

  function inspectObject(value, depth, seen, indent) {
    if (typeof value === "function" && !seen.length && depth === 0) {
      // A lone function argument prints like node: [Function: name].
    }
    for (let i = 0; i < seen.length; i++) {
      if (seen[i] === value) return "[Circular *1]";
    }
    if (typeof value === "function") {
      const n = fnName(value);
      if (isClass(value)) return "[class " + (n || "(anonymous)") + "]";
      return "[Function: " + (n || "(anonymous)") + "]";
    }
    if (value instanceof Date) {
      const t = dateGetTime(value);
      return isNaNf(t) ? "Invalid Date" : dateToISOString(value);
    }
    if (value instanceof RegExp) return regexpToString(value);
    if (isError(value)) {
      let s;
      try { s = value.stack; } catch {}
      let head = errorToString(value);
      if (typeof s === "string" && s !== "") head = head + "\n" + stringReplace(s, /\n$/, "");
      const extra = objectKeys(value);
      if (extra.length === 0) return head;
      const parts = arrayMap(extra, (k) => formatKey(k) + ": " + inspect(value[k], depth + 1, [...seen, value], indent + "  "));
      return head + " {\n" + indent + "  " + arrayJoin(parts, ",\n" + indent + "  ") + "\n" + indent + "}";
    }
    if (isPromise(value)) return "Promise { <state unknown> }";
    if (depth > 2) {
      if (ArrayIsArray(value)) return "[Array]";
      const n = ctorName(value);
      return "[" + (n || "Object") + "]";
    }
    const inner = [...seen, value];
    const sub = indent + "  ";
    let entries = [];
    let open = "{", close = "}", prefix = "";
    if (ArrayIsArray(value)) {
      open = "["; close = "]";
      let holes = 0;
      const n = value.length;
      const shown = MathMin(n, 100);
      const flush = () => {
        if (holes) arrayPush(entries, "<" + holes + " empty item" + (holes > 1 ? "s" : "") + ">");
        holes = 0;
      };
      for (let i = 0; i < shown; i++) {
        if (!hasOwn(value, i)) { holes++; continue; }
        flush();
        arrayPush(entries, inspect(value[i], depth + 1, inner, sub));
      }
      flush();
      if (n > shown) arrayPush(entries, "... " + (n - shown) + " more item" + (n - shown > 1 ? "s" : ""));
      for (const k of objectKeys(value)) {
        if (!regexpTest(/^(0|[1-9][0-9]*)$/, k)) arrayPush(entries, formatKey(k) + ": " + inspect(value[k], depth + 1, inner, sub));
      }
    } else if (value instanceof MapCtor) {
      prefix = "Map(" + mapSize(value) + ") ";
      const it = mapEntries(value);
      for (let r = iterNext(it); !r.done; r = iterNext(it)) {
        arrayPush(entries, inspect(r.value[0], depth + 1, inner, sub) + " => " + inspect(r.value[1], depth + 1, inner, sub));
      }
    } else if (value instanceof Set) {
      prefix = "Set(" + setSize(value) + ") ";
      const it = setValues(value);
      for (let r = iterNext(it); !r.done; r = iterNext(it)) arrayPush(entries, inspect(r.value, depth + 1, inner, sub));
    } else if (ArrayBufferIsView(value) && !(value instanceof DataView)) {
      const n = typedArrayLength(value);
      prefix = typedArrayTag(value) + "(" + n + ") ";
      open = "["; close = "]";
      for (let i = 0; i < MathMin(n, 100); i++) arrayPush(entries, inspect(value[i], depth + 1, inner, sub));
      if (n > 100) arrayPush(entries, "... " + (n - 100) + " more items");
    } else {
      let proto = null;
      try { proto = getPrototypeOf(value); } catch {}
      const n = ctorName(value);
      if (proto === null) prefix = "[Object: null prototype] ";
      else if (n && n !== "Object") prefix = n + " ";
      else {
        let tag;
        try { tag = value[SymbolToStringTag]; } catch {}
        if (typeof tag === "string" && tag !== "") prefix = "Object [" + tag + "] ";
      }
      if (value instanceof WeakMap || value instanceof WeakSet) return stringSlice(prefix, 0, -1) + " { <items unknown> }";
      for (const k of objectKeys(value)) {
        let v;
        try { v = value[k]; } catch (e) { v = e; }
        arrayPush(entries, formatKey(k) + ": " + inspect(v, depth + 1, inner, sub));
      }
    }
    if (entries.length === 0) return prefix + (open === "[" ? "[]" : "{}");
    let total = entries.length + prefix.length + indent.length + 10;
    let multiline = false;
    for (const e of entries) {
      total += e.length;
      if (stringIncludes(e, "\n")) multiline = true;
    }
    if (!multiline && total <= 80) return prefix + open + " " + arrayJoin(entries, ", ") + " " + close;
    return prefix + open + "\n" + sub + arrayJoin(entries, ",\n" + sub) + "\n" + indent + close;
  }

  // util.format: a leading format string with %s %d %i %f %j %o %O %c %%.
  function format(args) {
    let first = 0;
    let out = "";
    if (typeof args[0] === "string" && args.length > 1 && stringIncludes(args[0], "%")) {
      const f = args[0];
      let a = 1;
      let last = 0;
      for (let i = 0; i < f.length - 1; i++) {
        if (f[i] !== "%") continue;
        const c = f[i + 1];
        let rep;
        if (c === "%") { out += stringSlice(f, last, i) + "%"; last = i + 2; i++; continue; }
        if (a >= args.length) continue;
        const v = args[a];
        switch (c) {
          case "s": rep = typeof v === "string" ? v : typeof v === "bigint" ? bigintToString(v) + "n" : typeof v === "object" && v !== null ? inspect(v, 1, [], "") : inspect(v, 0, [], ""); break;
          case "d": case "i": {
            if (typeof v === "bigint") rep = bigintToString(v) + "n";
            else if (typeof v === "symbol") rep = "NaN";
            else { const n = NumberCtor(v); rep = formatNumber(c === "i" ? (n < 0 ? -MathFloor(-n) : MathFloor(n)) : n); }
            break;
          }
          case "f": rep = typeof v === "symbol" ? "NaN" : formatNumber(NumberCtor(v)); break;
          case "j": try { rep = JSONStringify(v); } catch { rep = "[Circular]"; } break;
          case "o": case "O": rep = inspect(v, 1, [], ""); break;
          case "c": rep = ""; break;
          default: continue;
        }
        out += stringSlice(f, last, i) + rep;
        last = i + 2;
        i++;
        a++;
      }
      out += stringSlice(f, last);
      first = a;
      if (first < args.length) out += " ";
    } else if (args.length > 0) {
      out = inspect(args[0], 0, [], "");
      first = 1;
      if (args.length > 1) out += " ";
    }
    const rest = [];
    for (let i = first; i < args.length; i++) arrayPush(rest, inspect(args[i], 0, [], ""));
    return out + arrayJoin(rest, " ");
  }

  const consoleObject = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    const fn = {
      [level](...args) {
        let line;
        try { line = format(args); } catch (e) { line = "[unprintable: " + (isError(e) ? errorToString(e) : "error") + "]"; }
        host(OP_LOG, level, line);
      },
    }[level];
    defineProperty(consoleObject, level, { value: fn, writable: true, enumerable: true, configurable: true });
  }
  defineProperty(G, "console", { value: consoleObject, writable: true, enumerable: false, configurable: true });

  // ---- URL and URLSearchParams (url.js), loaded on first use: most
  // programs never touch them, and loading costs a few hundred
  // microseconds. Loading redefines both globals as ordinary values.
  for (const name of ["URL", "URLSearchParams"]) {
    defineProperty(G, name, {
      get() {
        host(OP_URL);
        return G[name];
      },
      set(v) {
        defineProperty(G, name, { __proto__: null, value: v, writable: true, enumerable: false, configurable: true });
      },
      enumerable: false,
      configurable: true,
    });
  }

  // ---- Timers: the host keeps the clock; callbacks run on the run loop.

  let timerSeq = 0;
  const timers = new MapCtor();
  const addTimer = (fn, ms, args, repeat) => {
    if (typeof fn !== "function") throw new TypeErrorCtor("the callback must be a function (strings are never evaluated)");
    let delay = NumberCtor(ms);
    if (!(delay >= 1 && delay <= 2147483647)) delay = 1;
    const id = ++timerSeq;
    mapSet(timers, id, { fn, args, repeat, delay });
    host(OP_TIMER, id, delay);
    return id;
  };
  const clearTimer = (id) => {
    const n = NumberCtor(id);
    if (mapHas(timers, n)) {
      mapDelete(timers, n);
      host(OP_CLEAR_TIMER, n);
    }
  };
  const timerFns = {
    setTimeout(fn, ms, ...args) { return addTimer(fn, ms, args, false); },
    setInterval(fn, ms, ...args) { return addTimer(fn, ms, args, true); },
    clearTimeout(id) { clearTimer(id); },
    clearInterval(id) { clearTimer(id); },
  };
  for (const name of objectKeys(timerFns)) {
    defineProperty(G, name, { value: timerFns[name], writable: true, enumerable: false, configurable: true });
  }

  // ---- Binding namespaces and calls.

  const pending = new MapCtor(); // call id -> { resolve, reject, ns, name }
  const callIds = new WeakMapCtor(); // call promise -> call id
  const namespaces = []; // index -> { name, errorClass, dataKind, tree }
  // treeEpoch counts the runs a kept heap has served: listings made in
  // an earlier run are fetched again, since the host's tools may have
  // changed in between.
  let treeEpoch = 0;

  // hostErrors remembers the errors made here for failed calls, with the
  // kind and member they were made with: only those are reported to the
  // host as call failures, whatever a program sets on its own errors (or
  // later on these).
  const hostErrors = new WeakMapCtor();
  const makeError = (ns, name, kind, message) => {
    const C = ns.errorClass;
    const e = C ? new C(message) : new ErrorCtor(message);
    if (C) {
      defineProperty(e, "kind", { __proto__: null, value: kind, writable: true, enumerable: true, configurable: true });
      defineProperty(e, ns.member, { __proto__: null, value: name, writable: true, enumerable: true, configurable: true });
      weakSet(hostErrors, e, { __proto__: null, kind, member: name });
    }
    return e;
  };

  // startCall serializes the input and hands the call to the host. Depth
  // and reserved keys are checked by the host on the JSON text; here only
  // what JSON cannot carry is refused.
  function startCall(nsIndex, pathId, name, input) {
    let json = "{}";
    if (input !== undefined) {
      try {
        json = JSONStringify(input, argsReplacer);
      } catch (e) {
        // Input that is not data is refused as such. Anything else thrown
        // while reading it (a getter, toJSON, a proxy trap) is the
        // program's own exception: like any async function reading its
        // argument, the call rejects with it.
        const problem = boundaryProblem(e, "the input");
        if (problem === undefined) return promiseReject(e);
        const ns = namespaces[nsIndex];
        return promiseReject(makeError(ns, name, ns.dataKind, problem));
      }
    }
    // hostCall(pathId, json) numbers the call and answers with the
    // outcome already when it has one: the result's JSON text, or -id for
    // a failure, whose {kind, message} host(OP_FAILURE) then gives. A
    // positive id means the call is under way; settle delivers it later.
    // Only promises that may reject are remembered by id: Promise.race
    // cancels pending ones, and an unawaited rejection is traced to its call.
    const done = hostCall(pathId, json);
    if (typeof done === "string") return promiseResolve(JSONParse(done));
    const ns = namespaces[nsIndex];
    let p, id;
    if (done > 0) {
      id = done;
      let resolve, reject;
      p = new PromiseCtor((res, rej) => { resolve = res; reject = rej; });
      // The call's failure, made when it arrives, carries the stack of the
      // call, as one decided at once does: it locates the call in the
      // program however long the tool takes (or the run is suspended).
      mapSet(pending, id, { resolve, reject, ns, name, site: new ErrorCtor() });
    } else {
      id = -done;
      const r = JSONParse(host(OP_FAILURE));
      p = promiseReject(makeError(ns, name, r.kind, r.message));
    }
    weakSet(callIds, p, id);
    return p;
  }

  // settle delivers a finished call: a positive id carries its result, a
  // negative one its failure ({kind, message}).
  function settle(id, payload) {
    const ok = id > 0;
    if (!ok) id = -id;
    const c = mapGet(pending, id);
    if (!c) return;
    mapDelete(pending, id);
    if (ok) {
      c.resolve(JSONParse(payload));
    } else {
      const r = JSONParse(payload);
      const e = makeError(c.ns, c.name, r.kind, r.message);
      defineProperty(e, "stack", { __proto__: null, value: c.site.stack, writable: true, enumerable: false, configurable: true });
      c.reject(e);
    }
  }

  // Promise.race cancels the tool calls that lost: their host work is
  // cancelled, and awaiting one later rejects and says why.
  const race = {
    race(iterable) {
      const items = [...iterable];
      const result = apply(originalRace, this, [items]);
      const cancelLosers = () => {
        for (const item of items) {
          let id;
          try { id = isPromise(item) ? weakGet(callIds, item) : undefined; } catch {}
          if (id === undefined) continue;
          const c = mapGet(pending, id);
          if (!c) continue;
          mapDelete(pending, id);
          host(OP_CANCEL, id);
          c.reject(makeError(c.ns, c.name, "ToolFailure", "the call was interrupted: it lost a Promise.race and was cancelled"));
          promiseThen(item, undefined, () => {});
        }
      };
      promiseThen(result, cancelLosers, cancelLosers);
      return result;
    },
  }.race;
  defineProperty(PromiseCtor, "race", { value: race, writable: true, enumerable: false, configurable: true });

  // makeNamespace builds the proxy tree lazily: a node's proxy is made on
  // first access. Every path below the root is callable. The member tree
  // stays on the host: enumerating a node asks for its children once (the
  // tree is fixed for the run), so installing a namespace costs the same
  // for three tools or three thousand.
  //
  // A node is a proxy without a get trap over a target that keeps, as own
  // properties, the children made so far: reading a path already read is
  // an ordinary property read. The first read of a name falls through to
  // the target's prototype, a proxy that makes the child and caches it.
  // The target's own function properties (name, length) are removed so
  // that tools may use those names too.
  //
  // A node's state is one record, found from either target in a WeakMap,
  // and every node shares the two handlers: making a node (a run's first
  // read of each tool) makes two proxies, two targets and the record, not
  // a dozen closures.
  const nodes = new WeakMapCtor(); // a node's target, or its prototype's, to its record
  const pidOf = (n) => n.pathId || (n.pathId = host(OP_PATH, n.ns, JSONStringify(n.path)));
  const nameOf = (n) => n.name || (n.name = arrayJoin(n.path, "."));
  // listing is the node's child names, fetched once per tree epoch.
  const listing = (n) => {
    if (n.namesEpoch !== treeEpoch) {
      n.names = JSONParse(host(OP_CHILDREN, pidOf(n)));
      freeze(n.names);
      n.namesEpoch = treeEpoch;
    }
    return n.names;
  };
  const isChild = (n, k) => {
    const ns = listing(n);
    for (let i = 0; i < ns.length; i++) if (ns[i] === k) return true;
    return false;
  };
  const childOf = (n, k) => {
    const cached = getOwnPropertyDescriptor(n.target, k);
    if (cached !== undefined) return cached.value;
    const p = makeNode(n.ns, [...n.path, k]);
    defineProperty(n.target, k, { __proto__: null, value: p, writable: false, enumerable: false, configurable: true });
    return p;
  };
  // Handlers have no prototype: a trap the program adds to
  // Object.prototype must not become theirs.
  const protoHandler = {
    __proto__: null,
    get(t, k) {
      if (typeof k === "symbol" || k === "then" || k === "toJSON") return undefined;
      return childOf(weakGet(nodes, t), k);
    },
  };
  const nodeHandler = {
    __proto__: null,
    getPrototypeOf(t) { return weakGet(nodes, t).proto; },
    has(t, k) { return typeof k === "string" && isChild(weakGet(nodes, t), k); },
    ownKeys(t) { return arraySlice(listing(weakGet(nodes, t))); },
    getOwnPropertyDescriptor(t, k) {
      const n = weakGet(nodes, t);
      if (typeof k !== "string" || !isChild(n, k)) return undefined;
      return { __proto__: null, value: childOf(n, k), writable: false, enumerable: true, configurable: true };
    },
    set() { return false; },
    defineProperty() { return false; },
    deleteProperty() { return false; },
    setPrototypeOf() { return false; },
    preventExtensions() { return false; },
  };
  function makeNode(nsIndex, path) {
    const n = { __proto__: null, ns: nsIndex, path, name: "", pathId: 0, names: undefined, namesEpoch: -1, target: undefined, proto: undefined };
    // A callable node's target makes the call itself: a proxy without
    // an apply trap calls its target directly, with no argument array.
    const callable = path.length > 0;
    const target = callable ? (input) => startCall(nsIndex, pidOf(n), nameOf(n), input) : {};
    n.target = target;
    n.proto = getPrototypeOf(target);
    if (callable) {
      R.deleteProperty(target, "length");
      R.deleteProperty(target, "name");
    }
    const protoTarget = create(null);
    weakSet(nodes, target, n);
    weakSet(nodes, protoTarget, n);
    setPrototypeOf(target, new ProxyCtor(protoTarget, protoHandler));
    return new ProxyCtor(target, nodeHandler);
  }
  const makeNamespace = (nsIndex) => makeNode(nsIndex, []);

  function makeErrorClass(name) {
    const C = {
      [name]: class extends ErrorCtor {
        constructor(message) {
          super(message);
        }
      },
    }[name];
    defineProperty(C.prototype, "name", { value: name, writable: true, enumerable: false, configurable: true });
    return C;
  }

  function install(specJSON) {
    const spec = JSONParse(specJSON);
    for (const ns of spec) {
      const entry = { name: ns.name, errorClass: null, member: null, dataKind: "InvalidDataValue" };
      if (ns.errorClass) {
        entry.errorClass = makeErrorClass(ns.errorClass.name);
        entry.member = ns.errorClass.member;
        entry.dataKind = ns.errorClass.dataKind || entry.dataKind;
        defineProperty(G, ns.errorClass.name, { value: entry.errorClass, writable: true, enumerable: false, configurable: true });
      }
      const index = namespaces.length;
      arrayPush(namespaces, entry);
      defineProperty(G, ns.name, { value: makeNamespace(index), writable: false, enumerable: false, configurable: false });
    }
  }

  // ---- The data boundary: JSON.stringify semantics plus the contract's
  // refusals (cycles, depth > 32, reserved keys, functions, BigInt,
  // symbols, promises). For the final value, undefined becomes null.

  class BoundaryError extends ErrorCtor {}

  // argsReplacer refuses what JSON cannot carry; everything else follows
  // JSON.stringify (undefined keys dropped, Dates as ISO strings, ...).
  const argsReplacer = function (key, v) {
    switch (typeof v) {
      case "function": throw new BoundaryError(atKey(key) + "is a function, which is not data");
      case "bigint": throw new BoundaryError(atKey(key) + "is a BigInt; convert it with String() or Number()");
      case "symbol": throw new BoundaryError(atKey(key) + "is a symbol, which is not data");
      case "object": {
        if (v === null) return v;
        // Plain objects and arrays, nearly every input, are neither
        // promises nor errors; instanceof costs a few tenths of a
        // microsecond each.
        let proto;
        try { proto = getPrototypeOf(v); } catch {}
        if (proto === objectPrototype || proto === arrayPrototype) return v;
        if (isPromise(v)) throw new BoundaryError(atKey(key) + "is a Promise; await it first");
        if (isError(v)) return errorData(v);
      }
    }
    return v;
  };
  const atKey = (key) => (key === "" ? "" : "the value at key " + JSONStringify(key) + " ");
  const errorData = (v) => {
    const plain = { name: StringCtor(v.name), message: StringCtor(v.message) };
    const ks = objectKeys(v);
    for (let i = 0; i < ks.length; i++) if (ks[i] !== "name" && ks[i] !== "message") plain[ks[i]] = v[ks[i]];
    return plain;
  };
  // boundaryProblem describes a refusal of the data rules, or answers
  // undefined for any other exception.
  const boundaryProblem = (e, what) => {
    if (e instanceof BoundaryError) return what + " is not plain data: " + e.message;
    if (e instanceof TypeErrorCtor && stringIncludes(StringCtor(e.message), "circular")) {
      return what + " contains a cycle (an object that contains itself)";
    }
    return undefined;
  };
  const RESERVED = { __proto__: null, ["__proto__"]: true, constructor: true, prototype: true };
  const MAX_DEPTH = 32;

  function pathOf(info, v, key) {
    const parts = [];
    let k = key;
    let cur = v;
    for (let guard = 0; guard < 64; guard++) {
      if (k !== undefined && k !== "") arrayPush(parts, regexpTest(/^(0|[1-9][0-9]*)$/, k) ? "[" + k + "]" : regexpTest(identRe, k) ? "." + k : "[" + JSONStringify(k) + "]");
      const up = cur === undefined ? undefined : mapGet(info, cur);
      if (!up || up.parent === undefined) break;
      k = up.key;
      cur = up.parent;
    }
    let s = "";
    for (let i = parts.length - 1; i >= 0; i--) s += parts[i];
    return s;
  }

  function serialize(value, forResult, what) {
    const info = new MapCtor(); // object -> { depth, parent, key }
    const fail = (holder, key, problem) => {
      const at = pathOf(info, holder, key);
      throw new BoundaryError(what + (at ? " at " + what + at : "") + " " + problem);
    };
    const replacer = function (key, v) {
      const holder = this;
      if (typeof holder === "object" && holder !== null && !ArrayIsArray(holder) && RESERVED[key]) {
        fail(holder, key, "uses the reserved key " + JSONStringify(key) + "; rename it");
      }
      switch (typeof v) {
        case "undefined": return forResult ? null : undefined;
        case "function": fail(holder, key, "is a function, which is not data"); break;
        case "bigint": fail(holder, key, "is a BigInt; convert it with String() or Number()"); break;
        case "symbol": fail(holder, key, "is a symbol, which is not data"); break;
        case "object": {
          if (v === null) return null;
          if (isPromise(v)) fail(holder, key, "is a Promise; await it first");
          const up = mapGet(info, holder);
          const depth = (up ? up.depth : 0) + 1;
          if (depth > MAX_DEPTH) fail(holder, key, "is nested deeper than " + MAX_DEPTH + " levels");
          if (isError(v)) v = errorData(v);
          mapSet(info, v, { depth, parent: holder, key });
          return v;
        }
      }
      return v;
    };
    let text;
    try {
      text = JSONStringify(value, replacer);
    } catch (e) {
      if (e instanceof BoundaryError) throw e;
      if (e instanceof TypeErrorCtor && stringIncludes(StringCtor(e.message), "circular")) {
        throw new BoundaryError(what + " contains a cycle (an object that contains itself)");
      }
      throw e;
    }
    if (text === undefined) text = forResult ? "null" : "{}";
    return text;
  }

  // ---- Describing failures for the host.

  function describe(e) {
    const d = { name: "", message: "", stack: "", kind: "", member: "", boundary: false };
    try {
      if (e instanceof BoundaryError) d.boundary = true;
      if (isError(e)) {
        d.name = StringCtor(e.name);
        d.message = StringCtor(e.message);
        const s = e.stack;
        if (typeof s === "string") d.stack = s;
        const made = weakGet(hostErrors, e);
        if (made !== undefined) {
          d.kind = made.kind;
          d.member = made.member;
        }
      } else {
        d.message = inspect(e, 0, [], "");
      }
    } catch {
      d.message = d.message || "an exception that could not be described";
    }
    return JSONStringify(d);
  }

  // ---- The control object the host calls.

  let main;
  return freeze({
    install,
    settle,
    // site is the stack where the program made pending call id, to
    // locate a held call in the program ("" when it cannot say).
    site(id) {
      const c = mapGet(pending, id);
      if (!c) return "";
      try {
        const s = c.site.stack;
        return typeof s === "string" ? s : "";
      } catch {
        return "";
      }
    },
    fire(id) {
      const t = mapGet(timers, id);
      if (!t) return;
      if (t.repeat) host(OP_TIMER, id, t.delay);
      else mapDelete(timers, id);
      apply(t.fn, undefined, t.args);
    },
    retree() {
      treeEpoch++;
    },
    cancelTimers() {
      for (const [id] of mapEntries(timers)) host(OP_CLEAR_TIMER, id);
      timers.clear();
    },
    start(v) {
      main = promiseResolve(v);
      promiseThen(main, undefined, () => {});
      return main;
    },
    // finish serializes a fulfilled program result: "1" + JSON, or
    // "0" + describe(error) when it is not data.
    finish(v) {
      switch (typeof v) {
        case "number": case "boolean": case "string": return "1" + JSONStringify(v);
        case "undefined": return "1null";
      }
      if (v === null) return "1null";
      try {
        return "1" + serialize(v, true, "the result");
      } catch (e) {
        // A value that is not data is refused as such; an exception from
        // reading it (a getter, toJSON, a proxy trap) is the program's own
        // and propagates, as it does when the engine itself reads the
        // value (awaiting it reads its then).
        if (e instanceof BoundaryError) return "0" + describe(e);
        throw e;
      }
    },
    describe,
    callId(p) {
      try { const id = weakGet(callIds, p); return id === undefined ? "0" : StringCtor(id); } catch { return "0"; }
    },
  });
})
