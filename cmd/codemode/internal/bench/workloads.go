// Package bench measures the runtime: run overhead, the tool-call bridge,
// parallel calls, compute against node, memory and cold start. It backs
// `codemode bench`.
package bench

// workload is one compute benchmark: JavaScript whose body runs once per
// iteration, identical for codemode and node.
type workload struct {
	name, title string
	setup       string // runs once, before timing
	body        string // one iteration; its value is kept live
	iters       int
}

var workloads = []workload{
	{"fib", "fib(25)", `function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }`, `fib(25)`, 5},
	{"objects", "10k objects: filter, map, sort, reduce", `const base = Array.from({ length: 10000 }, (_, i) => ({ id: i, region: ["eu", "us", "apac"][i % 3], amount: (i * 7919) % 1000 }))`,
		`base.filter((r) => r.region !== "us").map((r) => ({ ...r, taxed: r.amount * 1.2 })).sort((a, b) => b.taxed - a.taxed || a.id - b.id).reduce((s, r) => s + r.taxed, 0)`, 10},
	{"json", "JSON round trip, 1 MB", `const doc = Array.from({ length: 8000 }, (_, i) => ({ id: i, name: "item " + i, tags: ["a", "b", "c"], price: i / 7, nested: { ok: i % 2 === 0, note: "x".repeat(20) } }))`,
		`JSON.parse(JSON.stringify(doc)).length`, 5},
	{"strings", "string building, 10k appends", ``,
		`(() => { let s = ""; for (let i = 0; i < 10000; i++) s += "line " + i + ": " + (i * 31 % 97) + "\n"; return s.length })()`, 10},
	{"regex", "regex: extract and replace", `const text = Array.from({ length: 2000 }, (_, i) => "user" + i + "@example.com visited /page/" + (i % 50) + " at 2024-01-" + String(1 + i % 28).padStart(2, "0")).join("\n")`,
		`(text.match(/[\w.]+@[\w.]+/g).length + text.replace(/(\d{4})-(\d{2})-(\d{2})/g, "$3/$2/$1").length)`, 10},
}

// harness is the body of a function that times a workload with
// performance.now and returns [ms per iteration, sink]. It is the same
// text for codemode (as the program) and node (as a function body).
func harness(w workload) string {
	return w.setup + `
return (() => {
  let sink = 0
  for (let i = 0; i < 2; i++) sink += Number(` + w.body + `) || 0
  const t0 = performance.now()
  for (let i = 0; i < ` + itoa(w.iters) + `; i++) sink += Number(` + w.body + `) || 0
  return [(performance.now() - t0) / ` + itoa(w.iters) + `, sink]
})()`
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
