// Structured tool results: `metadata.data` of a TOOL_CALL_RESULT event or of a thread's
// tool message (docs/api.md). Two kinds are drawn: price bars (tushare daily / weekly /
// monthly) and a weather forecast (get_weather). Anything else, or a shape that does not
// check out here, is "no data": the card shows the result text as it always has. The
// server is trusted to send these shapes, but a chart must never throw on a bad one.

export interface Bar {
  time: string; // YYYY-MM-DD
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number | null;
}

export type Freq = "daily" | "weekly" | "monthly";

export interface Bars {
  kind: "bars";
  tsCode: string | null;
  freq: Freq | null;
  bars: Bar[]; // ascending by time, one per date
}

export interface ForecastDay {
  date: string; // YYYY-MM-DD
  min: number | null;
  max: number | null;
  precipitation: number | null;
  weatherCode: number | null;
  description: string;
}

export interface Forecast {
  kind: "forecast";
  location: string;
  current: {
    // The place's local time of these values (YYYY-MM-DDTHH:MM): its "today".
    time: string | null;
    temperature: number | null;
    apparentTemperature: number | null;
    humidity: number | null;
    windSpeed: number | null;
    weatherCode: number | null;
    description: string;
  };
  days: ForecastDay[];
  units: { temperature: string; precipitation: string; windSpeed: string };
}

export type ToolData = Bars | Forecast;

type Obj = Record<string, unknown>;

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const LOCAL_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/;
const FREQS = new Set(["daily", "weekly", "monthly"]);

function isObj(value: unknown): value is Obj {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function str(value: unknown, fallback = ""): string {
  return typeof value === "string" ? value : fallback;
}

function int(value: unknown): number | null {
  const n = num(value);
  return n !== null && Number.isInteger(n) ? n : null;
}

function bar(value: unknown): Bar | null {
  if (!isObj(value) || typeof value.time !== "string" || !DATE.test(value.time)) return null;
  const [open, high, low, close] = [num(value.open), num(value.high), num(value.low), num(value.close)];
  if (open === null || high === null || low === null || close === null) return null;
  const volume = num(value.volume);
  return { time: value.time, open, high, low, close, volume: volume !== null && volume >= 0 ? volume : null };
}

function bars(data: Obj): Bars | null {
  if (!Array.isArray(data.bars)) return null;
  // The chart needs strictly ascending, unique dates: sort, and keep the last of a date.
  const byDate = new Map<string, Bar>();
  for (const item of data.bars) {
    const b = bar(item);
    if (b) byDate.set(b.time, b);
  }
  if (!byDate.size) return null;
  const sorted = [...byDate.values()].sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
  const freq = typeof data.freq === "string" && FREQS.has(data.freq) ? (data.freq as Freq) : null;
  return { kind: "bars", tsCode: typeof data.tsCode === "string" ? data.tsCode : null, freq, bars: sorted };
}

function day(value: unknown): ForecastDay | null {
  if (!isObj(value) || typeof value.date !== "string" || !DATE.test(value.date)) return null;
  return {
    date: value.date,
    min: num(value.min),
    max: num(value.max),
    precipitation: num(value.precipitation),
    weatherCode: int(value.weatherCode),
    description: str(value.description),
  };
}

function forecast(data: Obj): Forecast | null {
  if (!Array.isArray(data.days)) return null;
  const days = data.days.map(day).filter((d): d is ForecastDay => d !== null);
  const current = isObj(data.current) ? data.current : {};
  const units = isObj(data.units) ? data.units : {};
  if (!days.length && num(current.temperature) === null) return null;
  return {
    kind: "forecast",
    location: str(data.location),
    current: {
      time: typeof current.time === "string" && LOCAL_TIME.test(current.time) ? current.time : null,
      temperature: num(current.temperature),
      apparentTemperature: num(current.apparentTemperature),
      humidity: num(current.humidity),
      windSpeed: num(current.windSpeed),
      weatherCode: int(current.weatherCode),
      description: str(current.description),
    },
    days,
    units: {
      temperature: str(units.temperature, "°C"),
      precipitation: str(units.precipitation, "mm"),
      windSpeed: str(units.windSpeed, "km/h"),
    },
  };
}

/** The drawable data a result's metadata carries, or null: show the text only. */
export function toolDataOf(metadata: unknown): ToolData | null {
  if (!isObj(metadata) || !isObj(metadata.data)) return null;
  const data = metadata.data;
  if (data.kind === "bars") return bars(data);
  if (data.kind === "forecast") return forecast(data);
  return null;
}
