//! Text in scripts the first fitting corpus lacked (Greek, Hebrew, Arabic, Devanagari, Thai,
//! Georgian) and `tree` listings (box drawing) must not be under-estimated: an estimate below
//! 0.85 of the exact count lets a request through that the API then refuses. Before session 31
//! these were estimated at 0.12–0.73 of their exact count (the model priced two- and three-byte
//! characters outside CJK and Cyrillic at nothing); the `other` kind of the model and the
//! `abjad-greek`, `indic-sea` and `tree` categories of the corpus fixed that.
//!
//!
//! Since session 32 the model prices each script by its own count ([`ferroloop::tokens::scripts`]),
//! so the same test also covers full-width forms and private-use characters (icons of `eza
//! --icons`), which o200k spends one to two tokens on each and the model had estimated at 0.44
//! and 0.20 of their exact count, and a box-drawn table.
//!
//! Since session 34 a few two-byte characters count apart from the rest of their script (Greek
//! capitals, Hebrew points and Yiddish ligatures, the letters Persian and Pashto add to
//! Arabic's), so Greek in capitals, Yiddish, Persian and Uyghur are here too, and a benchmark
//! table of figures between box-drawing rules.
//!
//! Since session 41 the scripts the vocabularies hardly know (Tibetan, Mongolian, Cherokee,
//! Canadian syllabics, Runic, Ol Chiki, Tifinagh, Coptic, Braille, decomposed Korean), the symbol
//! blocks (arrows, mathematical operators, enclosed numbers, shapes) and Vietnamese's Latin
//! Extended Additional letters have counts of their own (`rare_script`, `symbols`,
//! `latin_ext_additional`), and so do four-byte characters other than emoji (`rare_four`:
//! Gothic, mathematical alphanumerics, Adlam, CJK Extension B). Before, they cost the flat
//! three-byte price or the emoji's four-byte one: Tibetan was estimated at 0.24 of its o200k
//! count, Mongolian and Runic at 0.12, a formula at 0.60, arrows at 0.55, Gothic and Adlam at
//! 0.35, mathematical bold at 0.60.
//!
//! Since session 45 the combining diacritical marks of decomposed text (U+0300–U+036F) have a
//! count of their own (`combining_marks`), priced in a second step of the fit on the decomposed
//! forms of the corpus's `latin-eu` catalogs (`tools/fit-tokens/src/marks.rs`). Before, a mark
//! cost the flat two-byte price of prose, nearly nothing, and the four decomposed texts below
//! were estimated at 0.86, 0.81, 0.47 and 0.24 of their o200k counts (French, a macOS listing,
//! Vietnamese, stacked marks) and 0.75, 0.74, 0.55 and 0.45 of their cl100k counts.
//!
//! Also since session 45 the precomposed letters of polytonic Greek (Greek Extended,
//! U+1F00–U+1FFF) count with the scripts the vocabularies hardly know (`rare_script`) rather
//! than with monotonic Greek: they cost about two o200k tokens and three cl100k tokens each,
//! and a polytonic sentence was estimated at 0.52 of its o200k count and 0.75 of cl100k's.
//!
//! Since session 46 the characters that share Hangul's lead byte `EA` below its syllables
//! (U+A000–U+ABFF: Yi, Vai, Javanese, Cham, ...) count with `rare_script` rather than as Hangul:
//! the vocabularies spend a token per byte on them, and the Yi, Vai and Javanese texts below
//! were estimated at 0.38, 0.46 and 0.34 of their o200k counts, 0.75, 0.86 and 0.71 of cl100k's,
//! and `claude` at 0.79–0.94 of the larger.
//!
//! Also since session 46 Syriac and N'Ko, two-byte scripts that shared Thaana's count and were
//! estimated at 0.84 of their o200k counts, count with `rare_script` too; its price, fitted on
//! three-byte scripts, over-estimates them by about a quarter.
//!
//! Also since session 46 the miscellaneous symbols and dingbats (U+2600–U+27BF, U+2B00–U+2BFF:
//! `★ ☆ ☐ ☑ ✓ ✗`, and the three-byte emoji among them) have a count of their own,
//! `misc_symbols`, priced in a second step of the fit on generated lines of them
//! (`tools/fit-tokens/src/symbols.rs`). Before, they cost the flat `other3` price, and lines of
//! star ratings and of task-list boxes were estimated at 0.70 and 0.72 of their claude-legacy
//! counts and `claude` at 0.79 and 0.80 of the largest count (these tests compare `claude` with
//! the OpenAI counts, the larger of which the star ratings exceed by 60% in claude-legacy).
//!
//! Since session 47 the IPA Extensions and Spacing Modifier Letters (U+0250–U+02FF) have a
//! count of their own, `phonetic`, priced in a second step on generated transcriptions
//! (`tools/fit-tokens/src/phonetic.rs`); their leads `C9` and `CA` were Latin Extended, and a
//! transcribed sentence was estimated at 0.51 of its o200k count and 0.64 of cl100k's. Also
//! since session 47 the accented letters of code cost what they cost in prose: the `code` kind
//! had priced a Latin Extended letter at 8–13 tokens, and the Rust functions with Polish and
//! Czech comments below at 2.9–3.8 times their exact counts.
//!
//! Since session 48 CJK Extension A and the Yijing hexagram symbols (U+3400–U+4DFF), which
//! share the leads of kana (`E3`) and of the ideographs (`E4`), count with `rare_script` rather
//! than as kana and CJK, as U+A000–U+ABFF does rather than as Hangul: the vocabularies spend a
//! token per byte on them. The Extension A texts below were estimated at 0.40 and 0.76 of
//! their o200k counts and 0.76 and 0.96 of cl100k's; the hexagrams have a test of their own.
//!
//! Needs the exact counters (`cargo test -p ferroloop --features exact --test tokens_scripts`).
#![cfg(feature = "exact")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ferroloop::tokens::{Family, count_exact, estimate_text};

/// The floor: no document below this fraction of its exact count.
const FLOOR: f64 = 0.85;
/// Over-estimates only cost an early compaction, but a model that priced these characters at
/// several tokens each would be no estimate at all.
const CEILING: f64 = 3.0;

/// Sentences written for this test (not from the fitting corpus), each repeated to a few hundred
/// tokens so that rounding does not matter.
const TEXTS: [(&str, &str); 48] = [
    (
        "arabic",
        "تعتبر اللغة العربية من أكثر اللغات انتشاراً في العالم، ويتحدث بها ملايين الناس. وهي لغة رسمية في كثير من الدول.\n",
    ),
    (
        "hebrew",
        "העברית היא שפה שמית. היא השפה הרשמית של מדינת ישראל, ובמשך מאות שנים שימשה בעיקר לכתיבה ולתפילה.\n",
    ),
    (
        "greek",
        "Η ελληνική γλώσσα είναι η επίσημη γλώσσα της Ελλάδας και της Κύπρου, με ιστορία τριών χιλιετιών.\n",
    ),
    (
        "hindi",
        "हिन्दी भारत की राजभाषा है और करोड़ों लोग इसे बोलते हैं। इसकी लिपि देवनागरी है।\n",
    ),
    (
        "thai",
        "ภาษาไทยเป็นภาษาราชการของประเทศไทย และเป็นภาษาแม่ของคนไทยส่วนใหญ่ในประเทศ\n",
    ),
    (
        "georgian",
        "ქართული ენა საქართველოს სახელმწიფო ენაა და მას საკუთარი დამწერლობა აქვს.\n",
    ),
    (
        "tree",
        ".\n├── Cargo.toml\n├── src\n│   ├── main.rs\n│   ├── lib.rs\n│   └── tokens\n│       ├── model.rs\n│       └── classes.rs\n└── tests\n    └── scripts.rs\n",
    ),
    (
        "box table",
        "┌──────┬──────┐\n│ name │ size │\n├──────┼──────┤\n│ a.rs │ 12 K │\n└──────┴──────┘\n",
    ),
    (
        "full-width",
        "ＡＢＣＤＥＦＧ１２３４５６　ｈｅｌｌｏ　ｗｏｒｌｄ（テスト）！\n",
    ),
    (
        "greek capitals",
        "ΕΛΛΗΝΙΚΗ ΔΗΜΟΚΡΑΤΙΑ\nΥΠΟΥΡΓΕΙΟ ΠΑΙΔΕΙΑΣ ΚΑΙ ΘΡΗΣΚΕΥΜΑΤΩΝ\nΑΘΗΝΑ, ΘΕΣΣΑΛΟΝΙΚΗ, ΠΑΤΡΑ, ΗΡΑΚΛΕΙΟ\n",
    ),
    (
        "yiddish",
        "ייִדיש איז אַ שפּראַך וואָס ווערט גערעדט פֿון ייִדן איבער דער גאַנצער וועלט, און זי האָט אַ רייכע ליטעראַטור.\n",
    ),
    (
        "persian",
        "زبان فارسی یکی از زبان‌های هندواروپایی است که در ایران، افغانستان و تاجیکستان به آن سخن می‌گویند.\n",
    ),
    (
        "uyghur",
        "ئۇيغۇر تىلى تۈركىي تىللار ئائىلىسىگە تەۋە بولۇپ، شىنجاڭدا كۆپ ئىشلىتىلىدۇ.\n",
    ),
    (
        "benchmark table",
        "┌────────────┬────────┬───────────┬──────────┬───────┐\n\
         │     parser ┆  chunk ┆ ferroloop ┆     peer ┆ ratio │\n\
         ╞════════════╪════════╪═══════════╪══════════╪═══════╡\n\
         │  anthropic ┆   1460 ┆    9.61ms ┆  19.05ms ┆ 1.98x │\n\
         │  anthropic ┆  16384 ┆    7.02ms ┆  14.64ms ┆ 2.09x │\n\
         │     openai ┆   1460 ┆   11.37ms ┆  21.80ms ┆ 1.92x │\n\
         │     openai ┆  16384 ┆    8.15ms ┆  16.93ms ┆ 2.08x │\n\
         │ keep-alive ┆      1 ┆  102.44ms ┆ 230.19ms ┆ 2.25x │\n\
         └────────────┴────────┴───────────┴──────────┴───────┘\n",
    ),
    (
        "private use",
        "\u{e5ff} src\n\u{e7a8} main.rs\n\u{f021} lib.rs\n\u{e60b} package.json\n\u{f48a} README.md\n",
    ),
    (
        "tibetan",
        "བོད་ཀྱི་སྐད་ཡིག་ནི་བོད་ཀྱི་རིག་གཞུང་གི་གཞི་རྩ་ཡིན། ང་ཚོས་དེ་རིང་སློབ་གྲྭར་འགྲོ་གི་ཡོད།\n",
    ),
    (
        "mongolian",
        "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ ᠦᠨ ᠬᠡᠯᠡ ᠪᠣᠯ ᠮᠣᠩᠭᠣᠯ ᠤᠯᠤᠰ ᠤᠨ ᠠᠯᠪᠠᠨ ᠬᠡᠯᠡ ᠮᠥᠨ᠃\n",
    ),
    ("cherokee", "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ ᎠᏂᏴᏫᏯ ᏧᏬᏪᎳᏅᎯ ᎤᎾᏙᏓᏆᏍᎬ ᏑᏓᎵ ᎢᎦ.\n"),
    (
        "inuktitut",
        "ᐃᓄᒃᑎᑐᑦ ᐅᖃᐅᓯᖅ ᓄᓇᕗᑦ ᒐᕙᒪᒃᑯᖏᑦᑕ ᐊᑐᖅᑕᐅᔪᖅ ᐃᓄᐃᑦ ᐅᖃᐅᓯᖓ.\n",
    ),
    ("runic", "ᚠᚢᚦᚨᚱᚲ ᚷᚹᚺᚾᛁᛃ ᛇᛈᛉᛊ ᛏᛒᛖᛗ ᛚᛜᛞᛟ᛫ᚦᛖ ᚱᚢᚾᛖᛋ.\n"),
    ("ol chiki", "ᱥᱟᱱᱛᱟᱲᱤ ᱯᱟᱹᱨᱥᱤ ᱫᱚ ᱚᱞ ᱪᱤᱠᱤ ᱥᱟᱶᱛᱮ ᱚᱞ ᱟᱠᱟᱱᱟ᱾\n"),
    (
        "tifinagh",
        "ⵜⴰⵎⴰⵣⵉⵖⵜ ⴷ ⵜⵓⵜⵍⴰⵢⵜ ⵏ ⵉⵎⴰⵣⵉⵖⵏ ⴳ ⵜⴰⵎⴰⵣⵉⵔⵜ ⵏ ⵍⵎⵖⵔⵉⴱ.\n",
    ),
    ("coptic", "ⲡⲓⲛⲟⲩⲧⲉ ⲁϥⲑⲁⲙⲓⲟ ⲛⲧⲡⲉ ⲛⲉⲙ ⲡⲕⲁϩⲓ ϧⲉⲛ ⲧⲁⲣⲭⲏ.\n"),
    ("braille", "⠠⠃⠗⠁⠊⠇⠇⠑ ⠊⠎ ⠁ ⠞⠁⠉⠞⠊⠇⠑ ⠺⠗⠊⠞⠊⠝⠛ ⠎⠽⠎⠞⠑⠍⠲\n"),
    (
        // Korean decomposed into conjoining jamo (NFD, as macOS file names are).
        "korean nfd",
        "\u{1112}\u{1161}\u{11ab}\u{1100}\u{1173}\u{11af}\u{110b}\u{1173}\u{11ab} \
         \u{1112}\u{1161}\u{11ab}\u{1100}\u{116e}\u{11a8}\u{110b}\u{1165}\u{1105}\u{1173}\u{11af} \
         \u{1111}\u{116d}\u{1100}\u{1175}\u{1112}\u{1161}\u{1102}\u{1173}\u{11ab} \
         \u{1106}\u{116e}\u{11ab}\u{110c}\u{1161}\u{110b}\u{1175}\u{11b8}\u{1102}\u{1175}\u{1103}\u{1161}.\n",
    ),
    (
        "math",
        "For all ε > 0 ∃ δ > 0: |x − a| < δ ⇒ |f(x) − f(a)| < ε, and ∑ₙ aₙ ≤ ∫₀^∞ g(t) dt ≠ ∞ when g ∈ L¹(ℝ).\n",
    ),
    (
        "arrows",
        "build → test → deploy ⇒ done; ① parse ② check ③ emit ▶ next ◀ back ⟶ ⤴ ⇄ ↻\n",
    ),
    (
        "vietnamese",
        "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được hàng chục triệu người sử dụng hằng ngày.\n",
    ),
    ("gothic", "𐌰𐍄𐍄𐌰 𐌿𐌽𐍃𐌰𐍂 𐌸𐌿 𐌹𐌽 𐌷𐌹𐌼𐌹𐌽𐌰𐌼 𐍅𐌴𐌹𐌷𐌽𐌰𐌹 𐌽𐌰𐌼𐍉 𐌸𐌴𐌹𐌽.\n"),
    (
        "mathematical bold",
        "𝐓𝐡𝐞 𝐪𝐮𝐢𝐜𝐤 𝐛𝐫𝐨𝐰𝐧 𝐟𝐨𝐱 𝐣𝐮𝐦𝐩𝐬 𝐨𝐯𝐞𝐫 𝐭𝐡𝐞 𝐥𝐚𝐳𝐲 𝐝𝐨𝐠 — 𝘀𝗮𝗻𝘀 𝘀𝗲𝗿𝗶𝗳 𝚊𝚗𝚍 𝚖𝚘𝚗𝚘.\n",
    ),
    ("adlam", "𞤀𞤣𞤤𞤢𞤥 𞤆𞤵𞤤𞤢𞤪 𞤊𞤵𞥅𞤼𞤢 𞤸𞤢𞤤𞤢𞤲𞤣𞤫 𞤸𞤢𞤤𞥆𞤭 𞤆𞤵𞤤𞤫.\n"),
    (
        "cjk extension b",
        "𠂉𠂢𠂤𠆢𠈓𠌫𠎁𠍱𠏹𠑊 𠔉𠗖𠘨𠝏𠠇𠠺𠢹𠥼𠦝𠫓 𠬝𠵅𠷡𠺕𠹭𠹤𠽟𡈁𡉕𡉻\n",
    ),
    (
        "polytonic greek",
        "Ἡ γλῶσσα ἡ ἑλληνικὴ πολλοὺς αἰῶνας ἐγράφετο μετὰ πνευμάτων καὶ τόνων, ὡς ἐν τοῖς \
         ἀρχαίοις βιβλίοις ὁρῶμεν.\n",
    ),
    // Miscellaneous symbols and dingbats (U+2600–U+27BF, U+2B00–U+2BFF).
    (
        "star ratings",
        "★★★★☆ fast, small and well documented\n♥♥♡ lives left\n★★☆☆☆ the build is slow\n",
    ),
    (
        "task list",
        "☐ write the tests\n☑ fix the parser\n☒ drop the old API\n✓ docs ✗ benchmarks\n",
    ),
    // Two-byte scripts that shared Thaana's count.
    (
        "syriac",
        "ܠܫܢܐ ܣܘܪܝܝܐ ܗܘ ܠܫܢܐ ܕܐܬܡܠܠ ܒܗ ܒܡܕܢܚܐ ܡܨܥܝܐ، ܘܐܝܬ ܠܗ ܟܬܒܐ ܣܓܝܐܐ ܥܬܝܩܐ ܕܥܕܬܐ.\n",
    ),
    (
        "nko",
        "ߒߞߏ ߦߋ߫ ߛߓߍߛߎ߲ ߘߏ߫ ߟߋ߬ ߘߌ߫ ߸ ߡߊ߲ߘߋ߲ ߞߊ߲ ߠߎ߬ ߛߓߍ ߟߊ߫ ߊ߬ ߟߊ߫ ߞߏ߬ߝߐ ߟߎ߬ ߞߊ߲߬.\n",
    ),
    // Lead `EA` below the Hangul syllables (U+A000–U+ABFF).
    (
        "yi",
        "ꆈꌠꁱꂷ ꀉꂿꄉ ꇬꑤ ꆀꀕ ꃅꄜꑌ ꌠꅇꂷ, ꆈꌠ ꉙꄮ ꂿꊨꌋ ꁧꐯꑟ ꌺꅉ ꃀꐥꌦ。\n",
    ),
    ("vai", "ꕙꔤ ꕞꕌꖝ ꔳ ꕚꖩ ꗏ ꖸ ꔀꕌ ꕞ ꖏꕎ ꔒꕩ ꗋꔷ ꕉ ꘋꕧ ꔫꕃ ꕮ ꖨ ꗂ ꔻ ꕙꕢ.\n"),
    ("javanese", "ꦧꦱꦗꦮ ꦲꦶꦏꦸ ꦧꦱ ꦲꦁꦒꦺꦴꦤ꧀ ꦮꦺꦴꦁ ꦗꦮ ꦲꦶꦁ ꦠꦤꦃ ꦗꦮ ꦭꦤ꧀ ꦱꦸꦫꦶꦤꦩ꧀꧉\n"),
    // CJK Extension A and the Yijing hexagram symbols (U+3400–U+4DFF), leads `E3` and `E4`.
    (
        "cjk extension a",
        "㐀㐁㐂㐃㐄㐅㐆㐇 㒰㒱㒲㒳 䀀䀁䀂䀃 䶰䶱䶲䶳䶴䶵\n",
    ),
    (
        "chinese with extension a",
        "《康熙字典》收录了许多罕见字，例如㐂、㑳、㵘和䶮（南汉皇帝刘䶮之名），\
         现代输入法往往无法打出这些字。\n",
    ),
    // Phonetic transcription (IPA Extensions, Spacing Modifier Letters).
    (
        "ipa",
        "ðə kwɪk bɹaʊn fɒks dʒʌmps ˈoʊvɚ ðə ˈleɪzi dɔɡ. ʃi sɛlz siː ʃɛlz ɒn ðə siː ʃɔː. \
         ˈθɪŋkɪŋ əˈbaʊt ˌɪntəˈnæʃənəl fəˈnɛtɪk ˈælfəbɛt.\n",
    ),
    (
        "ipa dictionary",
        "pronunciation /prəˌnʌnsiˈeɪʃən/ n. the way in which a word is spoken; \
         measure /ˈmɛʒə/ v. to find the size of something; [tʰɔːt] [ˈbʌɾɚ]\n",
    ),
    // Decomposed text (NFD: a base letter, then its combining marks), written with escapes
    // because it looks the same as the precomposed text.
    (
        "french, decomposed",
        "Cre\u{301}er un fichier a\u{300} partir d'un mode\u{300}le : les donne\u{301}es sont \
         enregistre\u{301}es dans le re\u{301}pertoire pre\u{301}ce\u{301}dent, me\u{302}me si \
         l'acce\u{300}s est refuse\u{301}.\n",
    ),
    (
        "macos listing, decomposed names",
        "drwxr-xr-x   5 anna  staff    160 Mar  3 10:12 Re\u{301}sume\u{301}s\n\
         -rw-r--r--   1 anna  staff   2048 Mar  3 10:14 Cafe\u{301} cre\u{300}me.txt\n\
         -rw-r--r--   1 anna  staff  88311 Mar  4 09:01 U\u{308}bersicht Ma\u{308}rz.pdf\n\
         -rw-r--r--   1 anna  staff   4096 Mar  5 17:40 An\u{303}o nuevo, Sa\u{303}o Paulo.md\n",
    ),
    (
        "vietnamese, decomposed",
        "Tie\u{302}\u{301}ng Vie\u{323}\u{302}t la\u{300} ngo\u{302}n ngu\u{31b}\u{303} chi\u{301}nh \
         thu\u{31b}\u{301}c cu\u{309}a Vie\u{323}\u{302}t Nam, đu\u{31b}o\u{31b}\u{323}c ha\u{300}ng \
         chu\u{323}c trie\u{323}\u{302}u ngu\u{31b}o\u{31b}\u{300}i su\u{31b}\u{309} du\u{323}ng.\n",
    ),
    (
        "stacked marks",
        "Z\u{36b}\u{346}\u{352}a\u{310}\u{30c}\u{35b}l\u{351}\u{34c}\u{305}g\u{30d}\u{33e}\u{344}o\u{301}\u{30b}\u{34a} \
         t\u{313}\u{308}\u{300}e\u{342}\u{30f}x\u{306}\u{30a}\u{34b}t\u{300}\u{357} i\u{352}\u{30d}s \
         h\u{300}\u{301}\u{302}\u{303}e\u{304}\u{305}r\u{306}\u{307}e\u{308}\u{309}.\n",
    ),
];

/// Checks `text`'s estimate against its o200k and cl100k counts: each ratio outside `bounds` is
/// a failure, named `name`. Returns the larger exact count.
fn check_openai_ratios(
    name: &str,
    text: &str,
    bounds: std::ops::RangeInclusive<f64>,
    failures: &mut Vec<String>,
) -> u64 {
    let mut most: u64 = 0;
    for family in [Family::O200k, Family::Cl100k] {
        let exact = count_exact(text, family).unwrap();
        most = most.max(exact);
        let ratio = estimate_text(text, family) as f64 / exact as f64;
        if !bounds.contains(&ratio) {
            failures.push(format!("{name} {family}: {ratio:.2}"));
        }
    }
    most
}

#[test]
fn scripts_outside_the_first_corpus_are_not_under_estimated() {
    let mut failures = Vec::new();
    for (name, sentence) in TEXTS {
        let text = sentence.repeat(12);
        let most = check_openai_ratios(name, &text, FLOOR..=CEILING, &mut failures);
        // `claude` has no exact vocabulary; it is fitted above the known ones.
        let claude = estimate_text(&text, Family::Claude) as f64 / most as f64;
        if claude < FLOOR {
            failures.push(format!("{name} claude / max(o200k, cl100k): {claude:.2}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Code whose comments, strings and identifiers are in Polish or Czech: its accented letters cost
/// what they cost in prose, so the estimate stays within twice the exact count (it was 2.9–3.8
/// times it when the `code` kind priced a Latin Extended letter at 8–13 tokens).
const ACCENTED_CODE: [(&str, &str); 2] = [
    (
        "polish rust",
        "fn główna() {\n    // Wyświetla powitanie dla użytkownika; błąd zwraca kod wyjścia 1.\n    \
         let wiadomość = \"Cześć, świecie! Zażółć gęślą jaźń.\";\n    println!(\"{}\", wiadomość);\n    \
         if let Err(błąd) = uruchom() { eprintln!(\"błąd: {błąd}\"); std::process::exit(1); }\n}\n",
    ),
    (
        "czech rust",
        "// Spočítá průměr; vrací chybu, když je seznam prázdný.\n\
         fn průměr(čísla: &[f64]) -> Result<f64, Chyba> {\n    \
         if čísla.is_empty() { return Err(Chyba::PrázdnýSeznam); } // žádná čísla\n    \
         Ok(čísla.iter().sum::<f64>() / čísla.len() as f64)\n}\n",
    ),
];

#[test]
fn accented_letters_in_code_cost_what_they_cost_in_prose() {
    let mut failures = Vec::new();
    for (name, code) in ACCENTED_CODE {
        let text = code.repeat(6);
        check_openai_ratios(name, &text, FLOOR..=2.0, &mut failures);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The Yijing hexagram symbols (U+4DC0–U+4DFF) between the ideographs of their names. They count
/// with `rare_script` as CJK Extension A does (they share its lead and first continuation
/// bytes), but the fit's `script` kind prices that count from Extension A in Chinese words,
/// and a hexagram, a symbol that the vocabularies' pre-tokenizers split from the ideographs
/// beside it, costs a token or two more. Counted as ideographs they were estimated at 0.61 of
/// their o200k count and 0.86 of cl100k's; now 0.78 and 0.82, short of the floor. Guard
/// documents of hexagrams held at the floor moved claude-legacy's `latin-eu` category over
/// 10% P90 (session 48), so this test holds the estimate at what the rare-script count gives.
#[test]
fn hexagrams_between_ideographs_are_not_priced_as_ideographs() {
    let text = "䷀ 乾 ䷁ 坤 ䷂ 屯 ䷃ 蒙 ䷄ 需 ䷅ 讼 ䷆ 师 ䷇ 比\n".repeat(12);
    let mut failures = Vec::new();
    check_openai_ratios("hexagrams", &text, 0.75..=CEILING, &mut failures);
    assert!(failures.is_empty(), "{failures:#?}");
}
