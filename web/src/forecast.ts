// The forecast card of a get_weather result, in plain DOM and SVG (no chart library):
// the current conditions, then one column per day with its weather, a min-max
// temperature bar on a scale shared by all the days, and its precipitation.
// renderForecast(data) returns the <figure>, marked data-days with the columns drawn.

import { h } from "./dom";
import { locale, t, weatherText } from "./i18n";
import type { Forecast, ForecastDay } from "./tooldata";

const SVG = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  ...children: (SVGElement | string)[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) el.append(child);
  return el;
}

// Icons: 24x24 strokes in currentColor, one per group of WMO codes.
const SUN = "M12 7.5a4.5 4.5 0 1 0 0 9a4.5 4.5 0 1 0 0-9M12 2v2M12 20v2M2 12h2M20 12h2M4.9 4.9l1.4 1.4M17.7 17.7l1.4 1.4M4.9 19.1l1.4-1.4M17.7 6.3l1.4-1.4";
const CLOUD = "M7 18h10a4 4 0 0 0 .6-7.96A5.5 5.5 0 0 0 7.1 9.1A4.5 4.5 0 0 0 7 18z";
const PARTLY = "M8.5 4.5a3.5 3.5 0 0 1 3.9 2.1M3.5 9a3.5 3.5 0 0 1 1.6-3.7M9 15h8.5a3.2 3.2 0 0 0 .4-6.4a4.5 4.5 0 0 0-8.6 1.2A2.6 2.6 0 0 0 9 15z";
const ICONS: Record<string, string> = {
  clear: SUN,
  partly: PARTLY,
  cloud: CLOUD,
  fog: "M4 9h16M3 13h18M5 17h14",
  rain: `M7 14h10a3.5 3.5 0 0 0 .5-6.96A5 5 0 0 0 7.6 6.1A4 4 0 0 0 7 14zM8 17l-1 3M12 17l-1 3M16 17l-1 3`,
  snow: `M7 14h10a3.5 3.5 0 0 0 .5-6.96A5 5 0 0 0 7.6 6.1A4 4 0 0 0 7 14zM8 18h.01M12 18h.01M16 18h.01M10 21h.01M14 21h.01`,
  storm: `M7 14h10a3.5 3.5 0 0 0 .5-6.96A5 5 0 0 0 7.6 6.1A4 4 0 0 0 7 14zM12.5 14l-2 4h3l-2 4`,
};

function iconKind(code: number | null): string {
  if (code === null) return "cloud";
  if (code === 0) return "clear";
  if (code === 1 || code === 2) return "partly";
  if (code === 3) return "cloud";
  if (code === 45 || code === 48) return "fog";
  if ((code >= 71 && code <= 77) || code === 85 || code === 86) return "snow";
  if (code >= 95) return "storm";
  if (code >= 51) return "rain";
  return "cloud";
}

function icon(code: number | null, size: number): SVGSVGElement {
  const kind = iconKind(code);
  return svg(
    "svg",
    {
      class: `wx-icon wx-${kind}`,
      width: size,
      height: size,
      viewBox: "0 0 24 24",
      fill: "none",
      stroke: "currentColor",
      "stroke-width": 1.7,
      "stroke-linecap": "round",
      "stroke-linejoin": "round",
      "aria-hidden": "true",
    },
    svg("path", { d: ICONS[kind] }),
  );
}

function degrees(value: number | null): string {
  return value === null ? "–" : `${Math.round(value)}°`;
}

// "Today" is the place's: its local date from the forecast's own time when given (a
// user in Berlin asking about Beijing after 16:00 UTC sees Beijing's tomorrow as its
// today), else the browser's.
function todayOf(placeTime: string | null): string {
  if (placeTime) return placeTime.slice(0, 10);
  const d = new Date();
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

function nextDay(date: string): string {
  const [y, m, d] = date.split("-").map(Number);
  return new Date(Date.UTC(y, m - 1, d + 1)).toISOString().slice(0, 10);
}

function dayName(date: string, today: string): { name: string; short: string } {
  const [y, m, d] = date.split("-").map(Number);
  const when = new Date(y, m - 1, d);
  const short = new Intl.DateTimeFormat(locale, { month: "numeric", day: "numeric" }).format(when);
  if (date === today) return { name: t.todayShort, short };
  if (date === nextDay(today)) return { name: t.tomorrow, short };
  return { name: new Intl.DateTimeFormat(locale, { weekday: "short" }).format(when), short };
}

// The temperature bars: a fixed-size SVG per day (text stays crisp at any width), all on
// the scale of the coldest and warmest values of the forecast.
const BAR_W = 64;
const BAR_H = 112;
const PAD = 18; // room for the labels above and below the bar

function rangeBar(day: ForecastDay, lo: number, hi: number): SVGSVGElement {
  const span = Math.max(hi - lo, 1);
  const y = (v: number) => PAD + ((hi - v) / span) * (BAR_H - 2 * PAD);
  const max = day.max ?? day.min;
  const min = day.min ?? day.max;
  const out = svg("svg", {
    class: "fc-range",
    width: BAR_W,
    height: BAR_H,
    viewBox: `0 0 ${BAR_W} ${BAR_H}`,
    "aria-hidden": "true",
  });
  if (max === null || min === null) return out;
  const top = y(max);
  const bottom = Math.max(y(min), top + 6);
  const x = BAR_W / 2 - 4;
  out.append(
    svg("rect", { class: "fc-track", x, y: PAD, width: 8, height: BAR_H - 2 * PAD, rx: 4 }),
    svg("rect", { class: "fc-bar", x, y: top, width: 8, height: bottom - top, rx: 4 }),
    svg("text", { class: "fc-max", x: BAR_W / 2, y: top - 5, "text-anchor": "middle" }, degrees(day.max)),
    svg("text", { class: "fc-min", x: BAR_W / 2, y: bottom + 13, "text-anchor": "middle" }, degrees(day.min)),
  );
  return out;
}

function rain(day: ForecastDay, most: number, unit: string): HTMLElement {
  const amount = day.precipitation;
  const width = 30;
  const filled = amount === null || most <= 0 ? 0 : Math.max(amount > 0 ? 3 : 0, (amount / most) * width);
  return h(
    "span",
    { class: "fc-rain", attrs: { title: t.precipitation } },
    svg(
      "svg",
      { width, height: 6, viewBox: `0 0 ${width} 6`, "aria-hidden": "true" },
      svg("rect", { class: "fc-rain-track", x: 0, y: 0, width, height: 6, rx: 3 }),
      svg("rect", { class: "fc-rain-bar", x: 0, y: 0, width: filled, height: 6, rx: 3 }),
    ),
    h("span", { class: "fc-rain-value", text: amount === null ? "–" : `${amount} ${unit}` }),
  );
}

export function renderForecast(data: Forecast): HTMLElement {
  const { current, days, units } = data;
  const temps = days.flatMap((d) => [d.min, d.max]).filter((v): v is number => v !== null);
  const lo = temps.length ? Math.min(...temps) : 0;
  const hi = temps.length ? Math.max(...temps) : 1;
  const most = Math.max(0, ...days.map((d) => d.precipitation ?? 0));
  const facts: [string, string | null][] = [
    [t.feelsLike, current.apparentTemperature === null ? null : degrees(current.apparentTemperature)],
    [t.humidity, current.humidity === null ? null : `${Math.round(current.humidity)}%`],
    [t.wind, current.windSpeed === null ? null : `${current.windSpeed} ${units.windSpeed}`],
  ];
  const now =
    current.temperature === null && !current.description
      ? null
      : h(
          "div",
          { class: "fc-now" },
          icon(current.weatherCode, 40),
          h(
            "div",
            { class: "fc-now-main" },
            h("span", { class: "fc-now-temp", text: degrees(current.temperature) }),
            h(
              "span",
              { class: "fc-now-desc" },
              `${t.now} · ${weatherText(current.weatherCode, current.description)}`,
              data.location ? h("span", { class: "fc-place", text: ` · ${data.location}` }) : null,
            ),
          ),
          h(
            "dl",
            { class: "fc-facts" },
            ...facts.flatMap(([label, value]) =>
              value === null ? [] : [h("div", {}, h("dt", { text: label }), h("dd", { text: value }))],
            ),
          ),
        );
  const today = todayOf(current.time);
  const columns = days.map((day) => {
    const { name, short } = dayName(day.date, today);
    const words = weatherText(day.weatherCode, day.description);
    const rainText = `${t.precipitation} ${day.precipitation ?? "–"} ${units.precipitation}`;
    return h(
      "li",
      {
        class: "fc-day",
        attrs: {
          "data-date": day.date,
          "aria-label": `${name} ${short}: ${words}, ${t.high_low(degrees(day.max), degrees(day.min))}, ${rainText}`,
        },
      },
      h("span", { class: "fc-day-name", text: name }),
      h("span", { class: "fc-day-date", text: short }),
      icon(day.weatherCode, 26),
      h("span", { class: "fc-day-desc", text: words }),
      rangeBar(day, lo, hi),
      rain(day, most, units.precipitation),
    );
  });
  return h(
    "figure",
    {
      class: "chart chart-forecast",
      attrs: {
        "data-days": String(columns.length),
        "aria-label": t.forecastChart(data.location, columns.length),
      },
    },
    now,
    columns.length ? h("ol", { class: "fc-days" }, ...columns) : null,
  );
}
