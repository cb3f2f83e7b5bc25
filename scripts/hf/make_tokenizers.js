// Writes the tokenizer.json fixtures of package tokenizer from tiktoken's
// own ranks, and tiktoken's token streams of hard texts.
//
// Usage (from the repository root; the npm registry must be reachable):
//     (cd scripts/hf && npm install --no-save tiktoken@1.0.22)
//     node scripts/hf/make_tokenizers.js tokenizer/testdata
//
// tiktoken (the npm package: the WASM build of OpenAI's Rust crate)
// encodes with cl100k_base and o200k_base. Each fixture keeps the first
// VOCAB ranks of one encoding (all 256 single bytes among them) with its
// real pre-tokenizer pattern and special tokens, renumbered after the
// ranks; a truncated rank table is still a byte-pair encoding, and
// tiktoken encodes with it (new Tiktoken(ranks, specials, pattern)), so
// the reference streams come from tiktoken itself. The ranks are written
// as Hugging Face writes a converted tiktoken vocabulary (transformers'
// TikTokenConverter, the Llama 3 layout): byte-level vocab strings, merges
// found by running BPE on each token with ranks below its own,
// ignore_merges true, a Split(Regex) then ByteLevel(use_regex false)
// pre-tokenizer and a ByteLevel decoder.
//
// Output: DIR/{cl100k,o200k}/tokenizer.json and DIR/tiktoken_streams.json
// ({encoding: [{text, ordinary, special}]}: ordinary is encode_ordinary,
// special is encode with every special token allowed).
//
// With --full (node make_tokenizers.js DIR --full [TEXT...]) it writes the
// whole vocabularies instead (megabytes: not for the repository), with
// the texts of the files TEXT added to the streams; package tokenizer's
// TestJSONMatchesTiktoken reads such a DIR from HILBERT_TOKENIZER_FULL.
const fs = require("fs");
const path = require("path");
const { Tiktoken } = require("tiktoken/lite");

const FULL = process.argv[3] === "--full";
const VOCAB = FULL ? Infinity : 2048;

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
// others for code points from 256 up.
function bytesToUnicode() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const m = new Array(256);
  bs.forEach((b, i) => (m[b] = String.fromCodePoint(cs[i])));
  return m;
}
const B2U = bytesToUnicode();
const bytesToStr = (bytes) => Array.from(bytes, (b) => B2U[b]).join("");

// bpe splits token (bytes) by merging, lowest rank first, only pairs of
// rank below maxRank (transformers' TikTokenConverter).
function bpe(ranks, token, maxRank) {
  let parts = Array.from(token, (b) => Buffer.from([b]));
  for (;;) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = ranks.get(Buffer.concat([parts[i], parts[i + 1]]).toString("latin1"));
      if (r !== undefined && r < maxRank && r < bestRank) {
        best = i;
        bestRank = r;
      }
    }
    if (best < 0) return parts;
    parts.splice(best, 2, Buffer.concat([parts[best], parts[best + 1]]));
  }
}

const TEXTS = [
  "Hello, world! How's it going? I'M fine, you'RE great, they'LL see, we'VE won, she'D know.",
  "  leading spaces, trailing spaces   ",
  "tabs\tand\tnewlines\n\nline two\r\nwindows line\r\n\r\n   \n  \t indented",
  "multiple     spaces     between      words\u00a0nbsp\u2003em\u3000ideographic",
  "ideographic\u3000\u3000\u3000spaces, em\u2003\u2003 \u2003dashes, trailing unicode spaces\u00a0\u00a0",
  "\u2028line\u2029para\u0085nel\u000bvt\u000cff \u00a0\n\u00a0 x\u1680\u1680y\u205f\u202f",
  "numbers 1 12 123 1234 12345 3.14159 1,000,000 0x1F 2024-12-03 ٣٤٥ ४५६",
  "English, Français, Español, Deutsch: Größe, Ελληνικά, Русский текст, Українська",
  "中文文本，日本語のテキスト、한국어 텍스트。",
  "עברית وعربي हिन्दी বাংলা தமிழ் ไทย ქართული Հայերեն ትግርኛ",
  "emoji 😀😃😄 👩‍👩‍👧‍👦 🇫🇷🇯🇵 👍🏽 ❤️ 🧑‍🚀",
  "code: func main() { fmt.Println(\"hi\") } // x += 1; y := []int{1, 2, 3}\n\tif a != b && c <= d {",
  "URLs https://example.com/path?q=1&r=two#frag and emails a.b@c.de",
  "CamelCaseWords and snake_case_words and SCREAMING_CASE and mIxEd",
  "punctuation!!! ??? ... --- *** ### $$$ %%% ^^^ &&& (((( )))) [[[ ]]] {{{ }}}",
  "special tokens <|endoftext|> in the middle<|endofprompt|>and <|fim_prefix|>x<|fim_suffix|>",
  "replacement \ufffd characters \ufffd\ufffd and combining e\u0301 a\u0308 n\u0303",
  "a".repeat(300) + " " + "ab".repeat(120) + " " + "\n".repeat(20) + " ".repeat(50) + "end",
  "don't won't can't shouldn't y'all o'clock 'quoted' \"double\" ’curly’",
  "",
  " ",
  "\n",
];

function main() {
  const out = process.argv[2];
  const streams = {};
  for (const [name, file] of [["cl100k", "cl100k_base"], ["o200k", "o200k_base"]]) {
    const e = require(`tiktoken/encoders/${file}.json`);
    const full = new Tiktoken(e.bpe_ranks, e.special_tokens, e.pat_str);
    const tokens = [];
    // bpe_ranks is "! 0" and then every token's base64, in rank order.
    const n = Math.min(VOCAB, e.bpe_ranks.split(" ").length - 2);
    for (let r = 0; r < n; r++) tokens.push(Buffer.from(full.decode_single_token_bytes(r)));
    full.free();
    const specials = {};
    Object.keys(e.special_tokens)
      .sort((a, b) => e.special_tokens[a] - e.special_tokens[b])
      .forEach((s, i) => (specials[s] = n + i));
    const ranksStr = "! 0 " + tokens.map((t) => t.toString("base64")).join(" ");
    const enc = new Tiktoken(ranksStr, specials, e.pat_str);

    const ranks = new Map(tokens.map((t, r) => [t.toString("latin1"), r]));
    const vocab = {};
    const merges = [];
    tokens.forEach((t, r) => {
      vocab[bytesToStr(t)] = r;
      if (t.length > 1) {
        const parts = bpe(ranks, t, r);
        if (parts.length !== 2) throw new Error(`${name}: token ${r} splits into ${parts.length}`);
        merges.push([bytesToStr(parts[0]), bytesToStr(parts[1])]);
      }
    });
    const tok = {
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: Object.entries(specials).map(([content, id]) => ({
        id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
      })),
      normalizer: null,
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          { type: "Split", pattern: { Regex: e.pat_str }, behavior: "Isolated", invert: false },
          { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
        ],
      },
      post_processor: null,
      decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: {
        type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
        fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges,
      },
    };
    fs.mkdirSync(path.join(out, name), { recursive: true });
    fs.writeFileSync(path.join(out, name, "tokenizer.json"), JSON.stringify(tok) + "\n");
    const texts = TEXTS.concat(FULL ? process.argv.slice(4).map((f) => fs.readFileSync(f, "utf8")) : []);
    streams[name] = texts.map((text) => ({
      text,
      ordinary: Array.from(enc.encode_ordinary(text)),
      special: Array.from(enc.encode(text, "all")),
    }));
    // Every stream decodes back to its text.
    for (const s of streams[name]) {
      const back = Buffer.from(enc.decode(Uint32Array.from(s.special))).toString("utf8");
      if (back !== s.text) throw new Error(`${name}: decode(encode(${JSON.stringify(s.text)})) = ${JSON.stringify(back)}`);
    }
    enc.free();
    console.log(`${name}: ${n} ranks, ${merges.length} merges, ${Object.keys(specials).length} specials`);
  }
  fs.writeFileSync(path.join(out, "tiktoken_streams.json"), JSON.stringify(streams) + "\n");
}

main();
