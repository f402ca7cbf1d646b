// describeCron turns a five-field cron expression into an English sentence,
// following the syntax of the server's cron package: numbers, names
// (JAN-DEC, SUN-SAT), "*", ranges, steps, L in day-of-month and d#n in
// day-of-week. When day-of-month and day-of-week are both restricted a day
// matches if either does, and the sentence says "or". It throws on input it
// cannot read; the server remains the judge of validity.

const MONTHS = ["January", "February", "March", "April", "May", "June", "July",
  "August", "September", "October", "November", "December"];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const ORDINALS = ["", "first", "second", "third", "fourth", "fifth"];

const FIELDS = {
  minute: { min: 0, max: 59 },
  hour: { min: 0, max: 23 },
  dom: { min: 1, max: 31 },
  month: { min: 1, max: 12, names: MONTH_NAMES, base: 1 },
  dow: { min: 0, max: 7, names: DAY_NAMES, base: 0 },
};

function num(s, f, what) {
  const up = s.toUpperCase();
  if (f.names) {
    const i = f.names.indexOf(up);
    if (i >= 0) return i + f.base;
  }
  if (!/^\d+$/.test(s)) throw new Error(`${what}: cannot read "${s}"`);
  const n = Number(s);
  if (n < f.min || n > f.max) throw new Error(`${what}: ${n} is out of range ${f.min}-${f.max}`);
  return n;
}

// parseField returns "*" for an unrestricted field, else a list of items:
// {kind: "value"|"range"|"step"|"last"|"nth", ...}.
function parseField(src, what) {
  const f = FIELDS[what];
  if (src === "*" || src === "?") return "*";
  return src.split(",").map((item) => {
    if (item === "") throw new Error(`${what}: empty item`);
    if (what === "dom" && item.toUpperCase() === "L") return { kind: "last" };
    if (what === "dow" && item.includes("#")) {
      const [d, n] = item.split("#");
      const nth = Number(n);
      if (!/^[1-5]$/.test(n)) throw new Error(`${what}: bad occurrence "${n}"`);
      return { kind: "nth", day: num(d, f, what), nth };
    }
    const [range, stepSrc] = item.split("/");
    let from, to, all = false;
    if (range === "*") { from = f.min; to = f.max; all = true; } else if (range.includes("-")) {
      const [a, b] = range.split("-");
      from = num(a, f, what); to = num(b, f, what);
    } else {
      from = num(range, f, what); to = stepSrc === undefined ? from : f.max;
    }
    if (stepSrc !== undefined) {
      if (!/^\d+$/.test(stepSrc) || Number(stepSrc) < 1) throw new Error(`${what}: bad step "${stepSrc}"`);
      return { kind: "step", from, to, step: Number(stepSrc), all };
    }
    if (all) return "*";
    if (from === to) return { kind: "value", v: from };
    return { kind: "range", from, to };
  }).reduce((acc, it) => (acc === "*" || it === "*" ? "*" : acc.concat([it])), []);
}

function list(words) {
  if (words.length <= 1) return words.join("");
  return words.slice(0, -1).join(", ") + " and " + words[words.length - 1];
}

const pad = (n) => String(n).padStart(2, "0");
const ordinal = (n) => n + (n % 10 === 1 && n % 100 !== 11 ? "st" : n % 10 === 2 && n % 100 !== 12 ? "nd" : n % 10 === 3 && n % 100 !== 13 ? "rd" : "th");

function items(field, name) {
  return field.map((it) => {
    switch (it.kind) {
      case "value": return name(it.v);
      case "range": return `${name(it.from)} through ${name(it.to)}`;
      case "step": return it.all ? `every ${ordinal(it.step)}` : `every ${ordinal(it.step)} from ${name(it.from)} through ${name(it.to)}`;
      case "last": return "the last day";
      case "nth": return `the ${ORDINALS[it.nth]} ${DAYS[it.day]} of the month`;
    }
    return "";
  });
}

const values = (field) => field !== "*" && field.every((it) => it.kind === "value");

function timePart(min, hour) {
  if (values(min) && values(hour) && min.length * hour.length <= 6) {
    const times = [];
    for (const h of hour) for (const m of min) times.push(`${pad(h.v)}:${pad(m.v)}`);
    return "At " + list(times);
  }
  let s;
  if (min === "*") s = "Every minute";
  else if (min.length === 1 && min[0].kind === "step") {
    s = `Every ${min[0].step} minutes` + (min[0].all ? "" : ` from minute ${min[0].from} through ${min[0].to}`);
  }
  else if (values(min)) s = `At minute ${list(min.map((m) => String(m.v)))}`;
  else s = "At minutes " + list(items(min, String));
  const everyN = min !== "*" && min.length === 1 && min[0].kind === "step";
  if (hour === "*") return s + (min === "*" || everyN ? "" : " past every hour");
  if (hour.length === 1 && hour[0].kind === "step" && hour[0].all) return s + ` past every ${ordinal(hour[0].step)} hour`;
  if (values(hour)) return s + ` past hour ${list(hour.map((h) => pad(h.v)))}`;
  return s + ", hours " + list(items(hour, pad));
}

function domPart(dom) {
  if (dom.length === 1 && dom[0].kind === "last") return "on the last day of the month";
  if (dom.length === 1 && dom[0].kind === "step" && dom[0].all) return `every ${ordinal(dom[0].step)} day of the month`;
  const w = items(dom, String);
  return `on day${values(dom) && dom.length === 1 ? "" : "s"} ${list(w)} of the month`;
}

function dowPart(dow) {
  if (dow.length === 1 && dow[0].kind === "range") return `${DAYS[dow[0].from]} through ${DAYS[dow[0].to]}`;
  return "on " + list(items(dow, (d) => DAYS[d]));
}

export function describeCron(expr) {
  const parts = String(expr).trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`a cron expression has 5 fields, not ${parts.length}`);
  const [min, hour, dom, month, dow] = ["minute", "hour", "dom", "month", "dow"].map((w, i) => parseField(parts[i], w));
  let s = timePart(min, hour);
  const days = [];
  if (dom !== "*") days.push(domPart(dom));
  if (dow !== "*") days.push(dowPart(dow));
  if (days.length) s += ", " + days.join(" or ");
  if (month !== "*") s += ", in " + list(items(month, (m) => MONTHS[m - 1]));
  return s;
}
