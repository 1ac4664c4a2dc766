// The candlestick chart of a tushare bars result, drawn with TradingView's
// lightweight-charts. This module is only ever loaded through a dynamic import (view.ts),
// so the chart library stays out of the first paint's bundle.
//
// drawCandles(host, data) fills `host` (a <figure>) with a toolbar (MA5/MA10/MA20 and the
// up/down colour convention), a legend with the values of the bar under the crosshair
// (the newest bar otherwise) and the chart: candles, a volume histogram below them, a
// date axis. It marks the host with data-bars / data-volume (the points the series hold)
// once drawn. The arrow keys walk the bars when the chart has focus.

import {
  CandlestickSeries,
  ColorType,
  createChart,
  CrosshairMode,
  HistogramSeries,
  LineSeries,
  type IChartApi,
  type ISeriesApi,
  type MouseEventParams,
  type Time,
} from "lightweight-charts";
import { h } from "./dom";
import { locale, t } from "./i18n";
import { chartPrefs, type ChartPrefs } from "./store";
import type { Bar, Bars } from "./tooldata";

export interface ChartHandle {
  dispose(): void;
}

const MAS = [5, 10, 20] as const;
const MA_COLOURS: Record<number, string> = { 5: "#e0a100", 10: "#8e5bd6", 20: "#2f7bd3" };
const RED = "#e0393e";
const GREEN = "#179a5d";
// Tell every chart on the page when one of them changes a preference.
const PREFS_EVENT = "react-agent:chart-prefs";

const dark = window.matchMedia("(prefers-color-scheme: dark)");

const price = new Intl.NumberFormat(locale, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const compact = new Intl.NumberFormat(locale, { notation: "compact", maximumFractionDigits: 2 });
const percent = new Intl.NumberFormat(locale, {
  style: "percent",
  minimumFractionDigits: 2,
  maximumFractionDigits: 2,
  signDisplay: "exceptZero",
});

function colours(prefs: ChartPrefs): { up: string; down: string } {
  return prefs.redUp ? { up: RED, down: GREEN } : { up: GREEN, down: RED };
}

function cssVar(el: Element, name: string, fallback: string): string {
  return getComputedStyle(el).getPropertyValue(name).trim() || fallback;
}

/** Simple moving average of the closes: one point per bar from the n-th on. */
function movingAverage(bars: Bar[], n: number): { time: Time; value: number }[] {
  const out: { time: Time; value: number }[] = [];
  let sum = 0;
  bars.forEach((bar, i) => {
    sum += bar.close;
    if (i >= n) sum -= bars[i - n].close;
    if (i >= n - 1) out.push({ time: bar.time as Time, value: Math.round((sum / n) * 1000) / 1000 });
  });
  return out;
}

function freqText(data: Bars): string {
  if (data.freq === "weekly") return t.freqWeekly;
  if (data.freq === "monthly") return t.freqMonthly;
  return t.freqDaily;
}

export function drawCandles(host: HTMLElement, data: Bars): ChartHandle {
  const bars = data.bars;
  let prefs = chartPrefs.get();
  const first = bars[0];
  const last = bars[bars.length - 1];
  const title = [data.tsCode, freqText(data)].filter(Boolean).join(" ");

  // --- toolbar and legend ------------------------------------------------------------
  const maButtons = MAS.map((n) =>
    h(
      "button",
      {
        class: "chip",
        attrs: { type: "button", "aria-pressed": String(prefs.ma.includes(n)), "data-ma": String(n) },
        on: { click: () => toggleMa(n) },
      },
      h("span", { class: "chip-swatch", attrs: { "aria-hidden": "true", "data-ma": String(n) } }),
      `MA${n}`,
    ),
  );
  const conventionButton = h("button", {
    class: "chip chip-convention",
    attrs: { type: "button", title: t.colourConvention },
    on: { click: () => savePrefs({ ...prefs, redUp: !prefs.redUp }) },
  });
  // Read out as the arrow keys move along the bars.
  const legend = h("div", { class: "chart-legend", attrs: { "aria-live": "polite" } });
  const canvas = h("div", {
    class: "chart-canvas",
    attrs: {
      tabindex: "0",
      role: "img",
      "aria-label": t.candleChart(title, bars.length, first.time, last.time),
    },
  });
  host.replaceChildren(
    h(
      "div",
      { class: "chart-toolbar" },
      h("span", { class: "chart-caption" }, h("strong", { text: title }), ` · ${t.bars(bars.length)}`),
      h(
        "span",
        { class: "chart-controls" },
        h(
          "span",
          { class: "chip-group", attrs: { role: "group", "aria-label": t.movingAverages } },
          ...maButtons,
        ),
        conventionButton,
      ),
    ),
    legend,
    canvas,
    // The licence asks for a link to TradingView on the page. Under the plot it covers no
    // bar, as the library's own logo (attributionLogo) in the plot's corner would.
    h(
      "figcaption",
      { class: "chart-credit" },
      t.chartBy,
      h("a", {
        text: "TradingView Lightweight Charts™",
        attrs: { href: "https://www.tradingview.com/", target: "_blank", rel: "noopener noreferrer" },
      }),
    ),
  );

  // --- the chart ---------------------------------------------------------------------
  const chart: IChartApi = createChart(canvas, {
    autoSize: true,
    layout: { background: { type: ColorType.Solid, color: "transparent" }, fontSize: 11, attributionLogo: false },
    localization: { locale, dateFormat: "yyyy-MM-dd" },
    crosshair: { mode: CrosshairMode.Normal },
    rightPriceScale: { scaleMargins: { top: 0.08, bottom: 0.28 } },
    timeScale: { fixLeftEdge: true, fixRightEdge: true, rightOffset: 0 },
    // The conversation scrolls with the wheel: the chart must not swallow it.
    handleScroll: { mouseWheel: false, pressedMouseMove: true, horzTouchDrag: true, vertTouchDrag: false },
    handleScale: { mouseWheel: false, pinch: true, axisPressedMouseMove: true, axisDoubleClickReset: true },
  });
  const candles = chart.addSeries(CandlestickSeries, {
    priceFormat: { type: "price", precision: 2, minMove: 0.01 },
  });
  const volume = chart.addSeries(HistogramSeries, {
    priceScaleId: "volume",
    priceFormat: { type: "volume" },
    lastValueVisible: false,
    priceLineVisible: false,
  });
  chart.priceScale("volume").applyOptions({ scaleMargins: { top: 0.78, bottom: 0 } });
  const maSeries = new Map<number, ISeriesApi<"Line">>();
  for (const n of MAS) {
    const line = chart.addSeries(LineSeries, {
      color: MA_COLOURS[n],
      lineWidth: 1,
      priceLineVisible: false,
      lastValueVisible: false,
      crosshairMarkerVisible: false,
      visible: prefs.ma.includes(n),
    });
    line.setData(movingAverage(bars, n));
    maSeries.set(n, line);
  }
  candles.setData(
    bars.map((b) => ({ time: b.time as Time, open: b.open, high: b.high, low: b.low, close: b.close })),
  );

  const index = new Map(bars.map((b, i) => [b.time, i]));
  const maAt = (n: number, i: number): number | null => {
    if (i < n - 1) return null;
    let sum = 0;
    for (let k = i - n + 1; k <= i; k++) sum += bars[k].close;
    return sum / n;
  };

  function paintVolume(): void {
    const { up, down } = colours(prefs);
    volume.setData(
      bars.map((b) =>
        b.volume === null
          ? { time: b.time as Time }
          : { time: b.time as Time, value: b.volume, color: `${b.close >= b.open ? up : down}80` },
      ),
    );
  }

  function paint(): void {
    const { up, down } = colours(prefs);
    candles.applyOptions({
      upColor: up,
      downColor: down,
      borderUpColor: up,
      borderDownColor: down,
      wickUpColor: up,
      wickDownColor: down,
    });
    paintVolume();
    for (const [n, line] of maSeries) line.applyOptions({ visible: prefs.ma.includes(n) });
    for (const button of maButtons) {
      button.setAttribute("aria-pressed", String(prefs.ma.includes(Number(button.dataset.ma))));
    }
    conventionButton.textContent = prefs.redUp ? t.redUp : t.greenUp;
    conventionButton.setAttribute("aria-pressed", String(prefs.redUp));
    host.dataset.convention = prefs.redUp ? "red-up" : "green-up";
    showLegend(current);
  }

  function theme(): void {
    const text = cssVar(host, "--muted", "#6b7384");
    const grid = cssVar(host, "--grid", "rgba(127,127,127,0.12)");
    const border = cssVar(host, "--border", "#e3e6eb");
    chart.applyOptions({
      layout: { textColor: text, fontFamily: cssVar(document.body, "font-family", "system-ui") },
      grid: { vertLines: { color: grid }, horzLines: { color: grid } },
      rightPriceScale: { borderColor: border },
      timeScale: { borderColor: border },
      crosshair: {
        vertLine: { labelBackgroundColor: cssVar(host, "--text-2", "#3d4656") },
        horzLine: { labelBackgroundColor: cssVar(host, "--text-2", "#3d4656") },
      },
    });
  }

  // --- legend: the hovered bar, else the newest --------------------------------------
  let current = bars.length - 1;

  function showLegend(i: number): void {
    const bar = bars[i];
    if (!bar) return;
    current = i;
    const prev = i > 0 ? bars[i - 1].close : null;
    const { up, down } = colours(prefs);
    const rising = bar.close >= (prev ?? bar.open);
    const value = (label: string, text: string, key: string, colour?: string) =>
      h(
        "span",
        { class: "legend-item", attrs: { "data-key": key } },
        h("span", { class: "legend-label", text: label }),
        h("span", { class: "legend-value", text, attrs: colour ? { "data-dir": rising ? "up" : "down" } : {} }),
      );
    const items = [
      h("span", { class: "legend-date", text: bar.time, attrs: { "data-key": "time" } }),
      value(t.open, price.format(bar.open), "open", "dir"),
      value(t.high, price.format(bar.high), "high", "dir"),
      value(t.low, price.format(bar.low), "low", "dir"),
      value(t.close, price.format(bar.close), "close", "dir"),
      prev ? value(t.change, percent.format((bar.close - prev) / prev), "change", "dir") : null,
      bar.volume !== null ? value(t.volume, compact.format(bar.volume), "volume") : null,
      ...MAS.filter((n) => prefs.ma.includes(n)).map((n) => {
        const ma = maAt(n, i);
        return ma === null ? null : value(`MA${n}`, price.format(ma), `ma${n}`);
      }),
    ];
    legend.replaceChildren(...items.filter((x): x is HTMLElement => x !== null));
    legend.style.setProperty("--up", up);
    legend.style.setProperty("--down", down);
    legend.dataset.time = bar.time;
  }

  const onMove = (param: MouseEventParams<Time>) => {
    const time = typeof param.time === "string" ? param.time : null;
    const i = time !== null ? index.get(time) : undefined;
    showLegend(i ?? bars.length - 1);
  };
  chart.subscribeCrosshairMove(onMove);

  // --- keyboard: walk the bars -------------------------------------------------------
  canvas.addEventListener("keydown", (event) => {
    const step: Record<string, number> = { ArrowLeft: -1, ArrowRight: 1 };
    let next: number | null = null;
    if (event.key in step) next = Math.min(bars.length - 1, Math.max(0, current + step[event.key]));
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = bars.length - 1;
    if (next === null) return;
    event.preventDefault();
    const bar = bars[next];
    chart.setCrosshairPosition(bar.close, bar.time as Time, candles);
    showLegend(next);
  });
  canvas.addEventListener("blur", () => {
    chart.clearCrosshairPosition();
    showLegend(bars.length - 1);
  });

  // --- preferences, shared by every chart on the page ---------------------------------
  function savePrefs(next: ChartPrefs): void {
    chartPrefs.set(next);
    window.dispatchEvent(new Event(PREFS_EVENT));
  }

  function toggleMa(n: number): void {
    const ma = prefs.ma.includes(n) ? prefs.ma.filter((m) => m !== n) : [...prefs.ma, n];
    savePrefs({ ...prefs, ma });
  }

  const onPrefs = () => {
    prefs = chartPrefs.get();
    paint();
  };
  const onScheme = () => theme();
  window.addEventListener(PREFS_EVENT, onPrefs);
  dark.addEventListener("change", onScheme);
  // Every bar stays in view when the card changes width (a phone turned, the sidebar).
  let width = 0;
  const resized = new ResizeObserver(([entry]) => {
    const w = Math.round(entry.contentRect.width);
    if (w && w !== width) {
      width = w;
      chart.timeScale().fitContent();
    }
  });
  resized.observe(canvas);

  theme();
  paint();
  chart.timeScale().fitContent();

  host.dataset.bars = String(candles.data().length);
  host.dataset.volume = String(volume.data().filter((point) => "value" in point).length);

  return {
    dispose() {
      window.removeEventListener(PREFS_EVENT, onPrefs);
      dark.removeEventListener("change", onScheme);
      resized.disconnect();
      chart.unsubscribeCrosshairMove(onMove);
      chart.remove();
    },
  };
}
