// The page's words, in Chinese and English: one catalogue, chosen once from the browser's
// language (navigator.language: zh* -> Chinese, anything else -> English). Text the
// server, the model or a tool wrote is shown as it came; only the page's own is here.
//
// index.html carries the Chinese text (what shows before the script runs) and marks each
// piece with data-i18n (text), data-i18n-label (aria-label), data-i18n-placeholder or
// data-i18n-title; applyStatic() swaps them.

export type Lang = "zh" | "en";

function detect(): Lang {
  const language = typeof navigator === "undefined" ? "" : navigator.language || "";
  return /^zh\b/i.test(language) ? "zh" : "en";
}

export const lang: Lang = detect();
/** The locale for dates and numbers (Intl, the chart's axis). */
export const locale = lang === "zh" ? "zh-CN" : "en-US";

const zh = {
  // index.html
  conversations: "会话",
  closeSidebar: "关闭会话列表",
  openSidebar: "打开会话列表",
  newThread: "新对话",
  history: "历史会话",
  noThreads: "还没有会话",
  searchThreads: "搜索会话",
  searchPlaceholder: "搜索会话标题",
  noMatches: "没有标题匹配的会话",
  signedInAs: "已登录",
  admin: "管理员",
  signOut: "退出登录",
  signInTitle: "登录",
  keyOrToken: "密钥或令牌",
  keyPlaceholder: "ra_… 或令牌",
  keyHintBefore: "只保存在本标签页（关闭即忘），请求时作为 ",
  keyHintAfter: " 发送。",
  signIn: "登录",
  agent: "智能体",
  conversation: "对话内容",
  runChoice: "上一条回答还没结束，这条消息要：",
  wait: "等待后发送",
  stopAndSend: "停止并发送",
  cancel: "取消",
  message: "消息",
  send: "发送",
  stop: "停止",
  queuedNote: "等待上一条回答结束后发送",
  unsentNote: "未送达",
  // composer and progress
  placeholder: "输入消息，Enter 发送，Shift+Enter 换行",
  placeholderShort: "输入消息",
  placeholderWaiting: "请先回答上面的问题，或点「取消」",
  placeholderWaitingShort: "请先回答上面的问题",
  thinking: "正在思考…",
  runningTools: "正在执行工具…",
  runningStep: (step: string) => `正在执行 ${step}…`,
  preparingCall: (tool: string) => `正在准备调用 ${tool}…`,
  answering: "正在回答…",
  connecting: "正在连接…",
  queued: "正在排队…",
  stopping: "正在停止…",
  running: "正在运行…",
  submitting: "正在提交…",
  recorded: (n: number) => `已记录，还有 ${n} 个问题待回答`,
  stopped: "已停止本次运行。可以继续发送新消息。",
  retry: "重试",
  loadingOlder: "正在加载更早的消息…",
  olderFailed: (why: string) => `更早的消息没能加载：${why}`,
  reloadThread: "刷新会话",
  signInWhy: "这个服务需要登录：粘贴管理员给你的密钥（ra_ 开头），或身份提供方签发的令牌。",
  signInAgain: "登录已失效（密钥可能已被撤销或更换），请重新登录。正在输入的消息会保留。",
  signInEmpty: "请先粘贴密钥或令牌。",
  signInRefused: (said: string) => `服务拒绝了这个密钥或令牌，请检查后重试。${said}`,
  noAgents: "服务没有可用的智能体。",
  askedYou: "向你提了一个问题",
  // sidebar
  justNow: "刚刚",
  minutesAgo: (n: number) => `${n} 分钟前`,
  today: (hm: string) => `今天 ${hm}`,
  deleteThread: "删除会话",
  deleteThreadNamed: (title: string) => `删除会话：${title}`,
  deletedThread: (title: string) => `已删除「${title}」`,
  undo: "撤销",
  renameThread: "重命名",
  renameThreadNamed: (title: string) => `重命名会话：${title}`,
  threadName: "会话名称",
  statusRunning: "运行中",
  statusWaiting: "等你回答",
  statusStopped: "已停止",
  statusFailed: "失败",
  fromTerminal: "终端",
  fromTerminalHint: "在终端里用 react-agent chat 开始的会话",
  // conversation
  talkTo: (agent: string) => `和「${agent}」对话`,
  startChat: "开始对话",
  examples: "示例问题",
  answeredQuestion: "已回答的问题",
  answered: "已回答",
  cancelled: "已取消",
  approved: "已批准",
  declined: "已拒绝",
  reasoning: "思考过程",
  reasoningLive: "思考中",
  args: "参数",
  result: "结果",
  noArgs: "（无参数）",
  empty: "（空）",
  toolStreaming: "准备参数",
  toolRunning: "运行中",
  toolWaiting: "等待你的回答",
  toolDone: "完成",
  toolFailed: "失败",
  toolDeclined: "未执行",
  toolStopped: "已中止",
  // interrupts
  badgeInput: "需要你的输入",
  badgeSelect: "请选择一项",
  badgeMulti: "可多选",
  badgeConfirm: "需要你的确认",
  riskSafe: "安全",
  riskSensitive: "敏感操作",
  riskDestructive: "高危操作",
  pleaseAnswer: "请回答",
  yourAnswer: "输入你的回答",
  submit: "提交",
  atLeast: (n: number) => `至少选择 ${n} 项 · `,
  chosen: (n: number) => `已选 ${n} 项`,
  approve: "批准执行",
  approveDestructive: "确认执行",
  decline: "拒绝",
  tool: "工具",
  risk: "风险",
  needAnswer: "请先填写回答",
  needChoice: "请先选择一项",
  needChoices: (n: number) => `请至少选择 ${n} 项`,
  listSep: "、",
  // failures
  networkDown: "网络连接中断：无法连接到服务，请检查服务是否在运行后重试。",
  requestFailed: (what: string) => `请求失败：${what}`,
  unauthorized: (said: string) => `未授权：请重新登录。${said}`,
  conflict: (said: string) => `请求冲突：${said || "该会话正在运行或状态已变化"}`,
  tooLarge: (said: string) => `内容过大，服务拒绝接收。${said}`,
  refused: (said: string) => `服务拒绝了请求：${said}`,
  serverError: (status: number, said: string) => `服务出错（HTTP ${status}）${said}`,
  said: (text: string) => (text ? `（${text}）` : ""),
  runError: (text: string) => `运行出错：${text}`,
  modelNotConfigured: (variable: string) =>
    `模型未配置：需要设置环境变量 ${variable}（或写入 .env），设置后重新启动再试。`,
  modelVariables: "OPENAI_API_KEY 和 OPENAI_MODEL",
  // charts
  candleChart: (what: string, n: number, from: string, to: string) =>
    `${what} K 线图：${n} 根，${from} 至 ${to}`,
  freqDaily: "日K",
  freqWeekly: "周K",
  freqMonthly: "月K",
  bars: (n: number) => `${n} 根`,
  open: "开",
  high: "高",
  low: "低",
  close: "收",
  volume: "量",
  change: "涨跌",
  redUp: "红涨绿跌",
  greenUp: "绿涨红跌",
  colourConvention: "涨跌颜色",
  movingAverages: "均线",
  chartBy: "图表：",
  forecastChart: (place: string, n: number) => `${place} 天气：当前和未来 ${n} 天`,
  now: "现在",
  feelsLike: "体感",
  humidity: "湿度",
  wind: "风速",
  precipitation: "降水",
  todayShort: "今天",
  tomorrow: "明天",
  high_low: (max: string, min: string) => `最高 ${max}，最低 ${min}`,
};

export type Catalogue = typeof zh;

const en: Catalogue = {
  conversations: "Conversations",
  closeSidebar: "Close the conversation list",
  openSidebar: "Open the conversation list",
  newThread: "New chat",
  history: "Past conversations",
  noThreads: "No conversations yet",
  searchThreads: "Search conversations",
  searchPlaceholder: "Search titles",
  noMatches: "No conversation title matches",
  signedInAs: "Signed in as",
  admin: "Admin",
  signOut: "Sign out",
  signInTitle: "Sign in",
  keyOrToken: "Key or token",
  keyPlaceholder: "ra_… or a token",
  keyHintBefore: "Kept in this tab only (forgotten when it closes), sent as ",
  keyHintAfter: " with each request.",
  signIn: "Sign in",
  agent: "Agent",
  conversation: "Conversation",
  runChoice: "The last answer has not finished. Send this message:",
  wait: "After it",
  stopAndSend: "Stop it and send",
  cancel: "Cancel",
  message: "Message",
  send: "Send",
  stop: "Stop",
  queuedNote: "Will be sent when the answer above ends",
  unsentNote: "Not sent",
  placeholder: "Type a message; Enter sends, Shift+Enter for a new line",
  placeholderShort: "Type a message",
  placeholderWaiting: "Answer the question above first, or cancel it",
  placeholderWaitingShort: "Answer the question above first",
  thinking: "Thinking…",
  runningTools: "Running tools…",
  runningStep: (step) => `Running ${step}…`,
  preparingCall: (tool) => `Preparing to call ${tool}…`,
  answering: "Answering…",
  connecting: "Connecting…",
  queued: "Waiting in line…",
  stopping: "Stopping…",
  running: "Running…",
  submitting: "Sending…",
  recorded: (n) => `Noted; ${n} more question${n === 1 ? "" : "s"} to answer`,
  stopped: "Stopped. You can send a new message.",
  retry: "Retry",
  loadingOlder: "Loading earlier messages…",
  olderFailed: (why) => `Earlier messages could not be loaded: ${why}`,
  reloadThread: "Reload the conversation",
  signInWhy: "This service asks you to sign in: paste the key your admin gave you (it starts with ra_), or a token from your identity provider.",
  signInAgain: "Your sign-in has ended (the key may have been revoked or replaced). Sign in again; the message you are typing stays.",
  signInEmpty: "Paste a key or a token first.",
  signInRefused: (said) => `The service refused this key or token; check it and try again.${said}`,
  noAgents: "The service has no agents.",
  askedYou: "asked you a question",
  justNow: "just now",
  minutesAgo: (n) => `${n} min ago`,
  today: (hm) => `today ${hm}`,
  deleteThread: "Delete conversation",
  deletedThread: (title) => `Deleted "${title}"`,
  undo: "Undo",
  deleteThreadNamed: (title) => `Delete conversation: ${title}`,
  renameThread: "Rename",
  renameThreadNamed: (title) => `Rename conversation: ${title}`,
  threadName: "Conversation name",
  statusRunning: "running",
  statusWaiting: "waiting for you",
  statusStopped: "stopped",
  statusFailed: "failed",
  fromTerminal: "terminal",
  fromTerminalHint: "Started in a terminal with react-agent chat",
  talkTo: (agent) => `Chat with ${agent}`,
  startChat: "Start a conversation",
  examples: "Example questions",
  answeredQuestion: "Answered question",
  answered: "Answered",
  cancelled: "Cancelled",
  approved: "Approved",
  declined: "Declined",
  reasoning: "Reasoning",
  reasoningLive: "thinking",
  args: "Arguments",
  result: "Result",
  noArgs: "(no arguments)",
  empty: "(empty)",
  toolStreaming: "preparing",
  toolRunning: "running",
  toolWaiting: "waiting for you",
  toolDone: "done",
  toolFailed: "failed",
  toolDeclined: "not run",
  toolStopped: "stopped",
  badgeInput: "Your input is needed",
  badgeSelect: "Pick one",
  badgeMulti: "Pick several",
  badgeConfirm: "Your approval is needed",
  riskSafe: "safe",
  riskSensitive: "sensitive",
  riskDestructive: "destructive",
  pleaseAnswer: "Please answer",
  yourAnswer: "Type your answer",
  submit: "Submit",
  atLeast: (n) => `Pick at least ${n} · `,
  chosen: (n) => `${n} picked`,
  approve: "Approve",
  approveDestructive: "Run it",
  decline: "Decline",
  tool: "Tool",
  risk: "Risk",
  needAnswer: "Type an answer first",
  needChoice: "Pick one first",
  needChoices: (n) => `Pick at least ${n}`,
  listSep: ", ",
  networkDown: "Connection lost: the service cannot be reached. Check that it is running, then retry.",
  requestFailed: (what) => `Request failed: ${what}`,
  unauthorized: (said) => `Not authorised: please sign in again.${said}`,
  conflict: (said) => `Conflict: ${said || "the conversation is running or has changed"}`,
  tooLarge: (said) => `Too large: the service refused it.${said}`,
  refused: (said) => `The service refused the request: ${said}`,
  serverError: (status, said) => `The service failed (HTTP ${status})${said}`,
  said: (text) => (text ? ` (${text})` : ""),
  runError: (text) => `The run failed: ${text}`,
  modelNotConfigured: (variable) =>
    `No model configured: set ${variable} on the server (or in .env), then restart it.`,
  modelVariables: "OPENAI_API_KEY and OPENAI_MODEL",
  candleChart: (what, n, from, to) => `${what} candlestick chart: ${n} bars, ${from} to ${to}`,
  freqDaily: "daily",
  freqWeekly: "weekly",
  freqMonthly: "monthly",
  bars: (n) => `${n} bars`,
  open: "O",
  high: "H",
  low: "L",
  close: "C",
  volume: "Vol",
  change: "Chg",
  redUp: "red up, green down",
  greenUp: "green up, red down",
  colourConvention: "Up/down colours",
  movingAverages: "Moving averages",
  chartBy: "Chart: ",
  forecastChart: (place, n) => `Weather in ${place}: now and the next ${n} days`,
  now: "Now",
  feelsLike: "Feels like",
  humidity: "Humidity",
  wind: "Wind",
  precipitation: "Precipitation",
  todayShort: "Today",
  tomorrow: "Tomorrow",
  high_low: (max, min) => `high ${max}, low ${min}`,
};

/** The catalogue in the page's language: `t.save`, `t.recorded(2)`. */
export const t: Catalogue = lang === "zh" ? zh : en;

// Agents and tools the page knows by a friendlier name; others show their id.
const AGENTS: Record<Lang, Record<string, string>> = {
  zh: { weather: "天气助手", tushare: "A 股分析" },
  en: { weather: "Weather", tushare: "A-share analyst" },
};

const TOOLS: Record<Lang, Record<string, string>> = {
  zh: {
    get_weather: "查询天气",
    resolve_stock: "识别股票",
    save_report: "保存报告",
    ask_input: "向你提问",
    ask_choice: "请你选择",
    ask_multi_choice: "请你多选",
    ask_confirm: "请你确认",
    stock_basic: "股票列表",
    daily: "日线行情",
    weekly: "周线行情",
    monthly: "月线行情",
    daily_basic: "每日指标",
  },
  en: {
    get_weather: "Weather",
    resolve_stock: "Find the stock",
    save_report: "Save a report",
    ask_input: "Question",
    ask_choice: "Choice",
    ask_multi_choice: "Choices",
    ask_confirm: "Confirmation",
    stock_basic: "Stock list",
    daily: "Daily bars",
    weekly: "Weekly bars",
    monthly: "Monthly bars",
    daily_basic: "Daily indicators",
  },
};

const EXAMPLES: Record<Lang, Record<string, string[]>> = {
  zh: {
    weather: ["北京今天天气怎么样？", "查天气", "上海和广州明天哪里更暖和？"],
    tushare: ["分析一下平安", "分析一下贵州茅台最近的走势", "000001.SZ 的月线趋势如何？"],
  },
  en: {
    weather: [
      "What's the weather in Beijing today?",
      "Check the weather",
      "Is Shanghai or Guangzhou warmer tomorrow?",
    ],
    tushare: [
      "Analyse Ping An",
      "How has Kweichow Moutai moved lately?",
      "What does 000001.SZ's monthly trend look like?",
    ],
  },
};

export function agentName(graphId: string): string {
  return AGENTS[lang][graphId] ?? graphId;
}

export function toolLabel(name: string): string | undefined {
  return TOOLS[lang][name];
}

export function examples(graphId: string): string[] {
  return EXAMPLES[lang][graphId] ?? [];
}

// WMO weather codes (Open-Meteo), grouped the way a forecast reads.
const WEATHER: Record<Lang, [number[], string][]> = {
  zh: [
    [[0], "晴"],
    [[1], "大致晴朗"],
    [[2], "多云"],
    [[3], "阴"],
    [[45, 48], "雾"],
    [[51, 53, 55, 56, 57], "毛毛雨"],
    [[61, 63, 65, 66, 67], "雨"],
    [[71, 73, 75, 77], "雪"],
    [[80, 81, 82], "阵雨"],
    [[85, 86], "阵雪"],
    [[95, 96, 99], "雷雨"],
  ],
  en: [
    [[0], "clear"],
    [[1], "mainly clear"],
    [[2], "partly cloudy"],
    [[3], "overcast"],
    [[45, 48], "fog"],
    [[51, 53, 55, 56, 57], "drizzle"],
    [[61, 63, 65, 66, 67], "rain"],
    [[71, 73, 75, 77], "snow"],
    [[80, 81, 82], "showers"],
    [[85, 86], "snow showers"],
    [[95, 96, 99], "thunderstorm"],
  ],
};

/** A WMO code's words in the page's language; `fallback` (the server's) for unknown codes. */
export function weatherText(code: number | null, fallback: string): string {
  if (code !== null) {
    for (const [codes, words] of WEATHER[lang]) if (codes.includes(code)) return words;
  }
  return fallback;
}

/** Swap the Chinese text index.html was written with for the page's language. */
export function applyStatic(root: Document = document): void {
  root.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  const words = t as unknown as Record<string, unknown>;
  const text = (key: string | undefined): string | null =>
    key && typeof words[key] === "string" ? (words[key] as string) : null;
  for (const el of root.querySelectorAll<HTMLElement>("[data-i18n]")) {
    const value = text(el.dataset.i18n);
    if (value !== null) el.textContent = value;
  }
  const attrs: [string, string][] = [
    ["i18nLabel", "aria-label"],
    ["i18nPlaceholder", "placeholder"],
    ["i18nTitle", "title"],
  ];
  for (const [key, attr] of attrs) {
    const selector = `[data-${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}]`;
    for (const el of root.querySelectorAll<HTMLElement>(selector)) {
      const value = text(el.dataset[key]);
      if (value !== null) el.setAttribute(attr, value);
    }
  }
  // Notes the stylesheet draws under a waiting or unsent message (::after content).
  const style = root.documentElement.style;
  style.setProperty("--note-queued", JSON.stringify(t.queuedNote));
  style.setProperty("--note-unsent", JSON.stringify(t.unsentNote));
}
