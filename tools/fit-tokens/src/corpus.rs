//! The fitting corpus: text found on the machine plus deterministic generators.
//!
//! Sources (all read locally, nothing downloaded):
//! - `prose`: licence texts in `/usr/share/common-licenses` and `README*.md` files of the
//!   workspace's locked crates in `~/.cargo/registry/src`.
//! - `rust`: `.rs` files of the locked crates in the cargo registry.
//! - `python`: `.py` files of the Python standard library.
//! - `zh`, `ja`, `ko`, `cyrillic`, `latin-eu`: translated man pages under `/usr/share/man/<lang>`
//!   (groff markup stripped) plus Python's `test/cjkencodings/*-utf8.txt`. CJK text exists on
//!   this machine, so the CJK generator fallback is not needed.
//! - `abjad-greek`, `indic-sea`: the translations in the gettext catalogs
//!   `/usr/share/locale/<lang>/LC_MESSAGES/*.mo` of two-byte scripts (Greek, Hebrew, Arabic,
//!   Armenian...) and three-byte ones (Indic, Thai, Georgian...).
//! - `json`, `logs`, `base64`, `hex`, `uuid`, `transcript`, `session`, `tree`: generated from a seeded PRNG and the embedded word list below, so they are
//!   identical on every machine.
//!
//! Reproducibility: a file's documents depend only on the file, its category and the seed
//! (each file cuts its text with a generator of its own), and only the crates of the
//! workspace's `Cargo.lock` are read from the registry (so `cargo fetch` gets every one of them
//! on another machine). A [`Selection`] built from `tests/tokens/manifest.json` reads exactly the
//! files the committed fit read, so crates or packages the machine holds besides them change
//! nothing; a fresh selection reads every file found.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// A seeded SplitMix64 generator (stable across platforms and Rust versions).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo).max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len())]
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One document of the corpus.
#[derive(Debug, Clone)]
pub struct Doc {
    pub category: &'static str,
    /// Source file (or `generated:<kind>:<n>`).
    pub source: String,
    pub text: String,
}

/// Where the machine's text lives.
pub struct Roots {
    pub cargo_registry: PathBuf,
    pub python_stdlib: PathBuf,
    pub licenses: PathBuf,
    pub man: PathBuf,
    /// Gettext catalogs (`<lang>/LC_MESSAGES/*.mo`).
    pub locale: PathBuf,
    /// The registry directories (`<name>-<version>`) that may be read: the packages of the
    /// workspace's `Cargo.lock`. A crate another project left in the shared registry is not
    /// read, so every file a fit reads from the registry can be fetched on any machine.
    pub crates: BTreeSet<String>,
}

impl Roots {
    /// This machine's roots; registry crates restricted to the packages of `cargo_lock`.
    pub fn detect(cargo_lock: &Path) -> std::io::Result<Roots> {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let registry_src = Path::new(&home).join(".cargo/registry/src");
        // The registry has one directory per index (e.g. `index.crates.io-<hash>`).
        let cargo_registry = list_dir(&registry_src)
            .into_iter()
            .find(|p| p.is_dir())
            .unwrap_or(registry_src);
        Ok(Roots {
            cargo_registry,
            python_stdlib: PathBuf::from("/root/.pyenv/versions/3.11.7/lib/python3.11"),
            licenses: PathBuf::from("/usr/share/common-licenses"),
            man: PathBuf::from("/usr/share/man"),
            locale: PathBuf::from("/usr/share/locale"),
            crates: locked_packages(&fs::read_to_string(cargo_lock)?),
        })
    }

    /// The files of the registry's locked crates accepted by `keep`, sorted.
    fn registry_files(&self, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in list_dir(&self.cargo_registry) {
            let locked = dir
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| self.crates.contains(n));
            if locked {
                walk(&dir, keep, &mut out);
            }
        }
        out
    }
}

/// The `<name>-<version>` of every registry package in a `Cargo.lock` (the workspace's own
/// packages, which have no `source`, are left out).
pub fn locked_packages(lock: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package.lines().find_map(|line| {
                let value = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
                Some(value.trim().trim_matches('"').to_owned())
            })
        };
        if let (Some(name), Some(version), Some(source)) =
            (field("name"), field("version"), field("source"))
            && source.starts_with("registry+")
        {
            out.insert(format!("{name}-{version}"));
        }
    }
    out
}

/// Which of the machine's files a corpus is read from, and the seed of their documents.
pub struct Selection {
    seed: u64,
    /// Per category, the files to read (their [`stable_path`]s); `None` reads every file found.
    listed: Option<BTreeMap<String, BTreeSet<String>>>,
    /// Listed files this machine does not have (`category: path`).
    missing: RefCell<Vec<String>>,
}

impl Selection {
    /// Every file found on the machine: a new corpus.
    pub fn fresh(seed: u64) -> Selection {
        Selection {
            seed,
            listed: None,
            missing: RefCell::new(Vec::new()),
        }
    }

    /// Only the files `listed` (per category, stable paths as [`stable_path`] gives them and
    /// the manifest records them): the corpus a fit with the same seed read, whatever else the
    /// machine holds. A category absent from `listed` reads no file.
    pub fn listed(seed: u64, listed: BTreeMap<String, BTreeSet<String>>) -> Selection {
        Selection {
            seed,
            listed: Some(listed),
            missing: RefCell::new(Vec::new()),
        }
    }

    /// The listed files not found so far (`category: path`).
    pub fn missing(&self) -> Vec<String> {
        self.missing.borrow().clone()
    }

    /// `files` narrowed to the category's listed ones (every one for a fresh selection),
    /// recording the listed files that are not among them.
    fn narrow(&self, category: &str, files: Vec<PathBuf>) -> Vec<PathBuf> {
        let Some(listed) = &self.listed else {
            return files;
        };
        let empty = BTreeSet::new();
        let wanted = listed.get(category).unwrap_or(&empty);
        let files: Vec<PathBuf> = files
            .into_iter()
            .filter(|p| wanted.contains(&stable_path(p)))
            .collect();
        let found: BTreeSet<String> = files.iter().map(|p| stable_path(p)).collect();
        self.missing.borrow_mut().extend(
            wanted
                .difference(&found)
                .map(|path| format!("{category}: {path}")),
        );
        files
    }
}

fn list_dir(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// All files under `dir` (sorted, no symlinks followed) accepted by `keep`.
fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    for path in list_dir(dir) {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, keep, out);
        } else if meta.is_file() && keep(&path) {
            out.push(path);
        }
    }
}

fn read_text(path: &Path) -> Option<String> {
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(fs::File::open(path).ok()?)
            .read_to_end(&mut s)
            .ok()?;
        s
    } else {
        fs::read(path).ok()?
    };
    String::from_utf8(bytes).ok()
}

/// Man macros whose arguments are text.
const TEXT_MACROS: &[&str] = &[
    "SH", "SS", "B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SM", "SB", "IP", "TP", "Nm", "Nd",
    "Op", "Ar", "Fl", "Pa", "Xr", "It", "Sh", "Dl", "UR", "MT", "TH",
];

/// Accent prefixes of groff's composite glyph names (`\\(:a` is `ä`) and the bases they
/// combine with, in the same order as the composed characters.
const GROFF_ACCENTS: &[(char, &str, &str)] = &[
    (':', "aeiouyAEIOU", "äëïöüÿÄËÏÖÜ"),
    ('\'', "aeiouyncszAEIOUYNCSZ", "áéíóúýńćśźÁÉÍÓÚÝŃĆŚŹ"),
    ('`', "aeiouAEIOU", "àèìòùÀÈÌÒÙ"),
    ('^', "aeiouAEIOU", "âêîôûÂÊÎÔÛ"),
    ('~', "anoANO", "ãñõÃÑÕ"),
    (',', "csCS", "çşÇŞ"),
    ('v', "cszrnedtCSZRNEDT", "čšžřňěďťČŠŽŘŇĚĎŤ"),
    ('/', "olOL", "øłØŁ"),
    ('o', "auAU", "åůÅŮ"),
];

/// The character of a groff special-character name (`em`, `:a`, `'e`, `ss`, ...), if known.
fn groff_glyph(name: &str) -> Option<char> {
    let fixed = match name {
        "em" => Some('—'),
        "en" => Some('–'),
        "aq" => Some('\''),
        "dq" => Some('"'),
        "bu" => Some('•'),
        "co" => Some('©'),
        "ss" => Some('ß'),
        "ae" => Some('æ'),
        "AE" => Some('Æ'),
        "oe" => Some('œ'),
        "Fo" => Some('«'),
        "Fc" => Some('»'),
        "lq" => Some('“'),
        "rq" => Some('”'),
        "oq" => Some('‘'),
        "cq" => Some('’'),
        "mu" => Some('×'),
        "de" => Some('°'),
        "rs" => Some('\\'),
        "ti" => Some('~'),
        "ha" => Some('^'),
        "hy" | "mi" => Some('-'),
        _ => None,
    };
    if fixed.is_some() {
        return fixed;
    }
    let mut it = name.chars();
    let (accent, base) = (it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let (_, bases, composed) = GROFF_ACCENTS.iter().find(|(a, _, _)| *a == accent)?;
    let index = bases.chars().position(|b| b == base)?;
    composed.chars().nth(index)
}

/// Strips groff markup from a man page, keeping its text: comments, requests, macro
/// definitions (`.de` … `..`) and conditionals are dropped; text macros keep their arguments.
pub fn strip_groff(src: &str) -> String {
    let mut out = String::new();
    let mut in_definition = false;
    for line in src.lines() {
        if in_definition {
            in_definition = line.trim_end() != "..";
            continue;
        }
        let text = if let Some(rest) = line.strip_prefix('.').or_else(|| line.strip_prefix('\'')) {
            let (name, args) = rest
                .trim_start()
                .split_once(char::is_whitespace)
                .unwrap_or((rest.trim(), ""));
            if matches!(name, "de" | "de1" | "am" | "ig") {
                in_definition = true;
                continue;
            }
            if !TEXT_MACROS.contains(&name) {
                continue;
            }
            args.trim().replace('"', "")
        } else if line.starts_with("\\\"") || line.starts_with("\\}") {
            continue;
        } else {
            line.to_owned()
        };
        let mut clean = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\\' {
                clean.push(c);
                continue;
            }
            match chars.next() {
                Some('f') => {
                    // \fB, \fI, \fR, \fP, \f(CW, \f[..]
                    match chars.next() {
                        Some('(') => {
                            chars.next();
                            chars.next();
                        }
                        Some('[') => {
                            for c in chars.by_ref() {
                                if c == ']' {
                                    break;
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Some('-') => clean.push('-'),
                Some('e') | Some('\\') => clean.push('\\'),
                Some(' ') | Some('~') => clean.push(' '),
                Some('&') | Some('|') | Some('^') | Some('c') => {}
                Some('(') => {
                    let name: String = chars.by_ref().take(2).collect();
                    if let Some(glyph) = groff_glyph(&name) {
                        clean.push(glyph);
                    }
                }
                Some('[') => {
                    // `\[name]`: a named glyph, like `\(xx` with a longer name.
                    let name: String = chars.by_ref().take_while(|&c| c != ']').collect();
                    if let Some(glyph) = groff_glyph(&name) {
                        clean.push(glyph);
                    }
                }
                Some('*') => {
                    // String interpolation (`\\*(xx` or `\\*x`): dropped.
                    let name = chars.next();
                    if name == Some('(') {
                        chars.next();
                        chars.next();
                    }
                }
                Some('s') => {
                    // size change \s-2, \s0
                    if matches!(chars.peek(), Some('-' | '+')) {
                        chars.next();
                    }
                    chars.next();
                }
                Some(other) => clean.push(other),
                None => {}
            }
        }
        if !clean.trim().is_empty() {
            out.push_str(&clean);
            out.push('\n');
        }
    }
    out
}

/// Splits `text` at line boundaries into pieces of roughly `lo..hi` bytes (at most `max`).
fn chunk(text: &str, rng: &mut Rng, lo: usize, hi: usize, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut target = rng.range(lo, hi);
    for line in text.split_inclusive('\n') {
        cur.push_str(line);
        if cur.len() >= target {
            out.push(std::mem::take(&mut cur));
            target = rng.range(lo, hi);
            if out.len() >= max {
                return out;
            }
        }
    }
    if cur.len() >= lo / 2 {
        out.push(cur);
    }
    out
}

/// Reads files into chunked documents of one category, up to `limit` documents.
fn docs_from_files(
    category: &'static str,
    files: Vec<PathBuf>,
    transform: &dyn Fn(String) -> String,
    selection: &Selection,
    limit: usize,
    per_file: usize,
) -> Vec<Doc> {
    docs_read_from_files(
        category, files, &read_text, transform, selection, limit, per_file,
    )
}

/// [`docs_from_files`] with its own reader (gettext catalogs are binary).
fn docs_read_from_files(
    category: &'static str,
    files: Vec<PathBuf>,
    read: &dyn Fn(&Path) -> Option<String>,
    transform: &dyn Fn(String) -> String,
    selection: &Selection,
    limit: usize,
    per_file: usize,
) -> Vec<Doc> {
    let seed = selection.seed;
    // Files are visited in the order of a hash of their path below the source root, and each
    // cuts its text with a generator seeded from that path: a file's documents do not depend
    // on which other files the machine holds, so reading only a manifest's files gives the
    // same documents as the fit that wrote it.
    let mut files: Vec<(String, PathBuf)> = selection
        .narrow(category, files)
        .into_iter()
        .map(|p| (stable_path(&p), p))
        .collect();
    files.sort_by_key(|(stable, _)| fnv1a(stable.as_bytes()) ^ seed);
    let mut docs = Vec::new();
    for (stable, path) in files {
        let Some(text) = read(&path) else {
            continue;
        };
        let text = transform(text);
        let mut rng = Rng::new(seed ^ fnv1a(format!("{category}\0{stable}").as_bytes()));
        for piece in chunk(&text, &mut rng, 800, 6_000, per_file) {
            docs.push(Doc {
                category,
                source: path.display().to_string(),
                text: piece,
            });
            if docs.len() >= limit {
                return docs;
            }
        }
    }
    docs
}

/// A fingerprint of a category's documents: FNV-1a over their texts, each ended by a NUL. The
/// manifest records it (in hex) so that a later run can tell it read the same corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint(FNV_OFFSET)
    }
}

impl Fingerprint {
    /// Adds the next document's text.
    pub fn add(&mut self, text: &str) {
        self.0 = fnv1a_from(fnv1a_from(self.0, text.as_bytes()), &[0]);
    }

    /// As the manifest writes it.
    pub fn hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(FNV_OFFSET, bytes)
}

/// FNV-1a continued from the hash of the bytes before `bytes`.
fn fnv1a_from(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The part of a path that does not depend on the machine (below the registry index directory,
/// the Python prefix or `/usr/share`).
pub fn stable_path(path: &Path) -> String {
    let s = path.display().to_string();
    for marker in ["/registry/src/", "/lib/python3.11/", "/usr/share/"] {
        if let Some(at) = s.find(marker) {
            let rest = &s[at + marker.len()..];
            // Drop the registry index directory name (`index.crates.io-<hash>/`).
            return match (marker, rest.split_once('/')) {
                ("/registry/src/", Some((_, below))) => below.to_owned(),
                _ => rest.to_owned(),
            };
        }
    }
    s
}

/// Builds the whole corpus: `limit` documents per category (fewer where the machine has less),
/// plus `sessions` simulated agent sessions.
pub fn build(roots: &Roots, selection: &Selection, limit: usize, sessions: usize) -> Vec<Doc> {
    let seed = selection.seed;
    let mut docs = Vec::new();
    let ident = |s: String| s;

    let mut prose = Vec::new();
    walk(&roots.licenses, &|_| true, &mut prose);
    prose.extend(roots.registry_files(&|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("README") && n.ends_with(".md"))
    }));
    docs.extend(docs_from_files("prose", prose, &ident, selection, limit, 3));

    let rust = roots.registry_files(&|p| p.extension().is_some_and(|e| e == "rs"));
    docs.extend(docs_from_files("rust", rust, &ident, selection, limit, 1));

    let mut python = Vec::new();
    walk(
        &roots.python_stdlib,
        &|p| {
            p.extension().is_some_and(|e| e == "py")
                && !p.components().any(|c| c.as_os_str() == "site-packages")
        },
        &mut python,
    );
    docs.extend(docs_from_files(
        "python", python, &ident, selection, limit, 1,
    ));

    let groff = |s: String| strip_groff(&s);
    let man = |langs: &[&str]| {
        let mut files = Vec::new();
        for lang in langs {
            walk(&roots.man.join(lang), &|_| true, &mut files);
        }
        files
    };
    let cjk_test = |names: &[&str]| -> Vec<PathBuf> {
        names
            .iter()
            .map(|n| {
                roots
                    .python_stdlib
                    .join("test/cjkencodings")
                    .join(format!("{n}-utf8.txt"))
            })
            .filter(|p| p.exists())
            .collect()
    };
    let mut zh = man(&["zh_CN", "zh_TW"]);
    zh.extend(cjk_test(&[
        "big5",
        "gb2312",
        "gbk",
        "gb18030",
        "big5hkscs",
        "hz",
    ]));
    docs.extend(docs_from_files("zh", zh, &groff, selection, limit, 4));
    let mut ja = man(&["ja"]);
    ja.extend(cjk_test(&[
        "euc_jp",
        "shift_jis",
        "euc_jisx0213",
        "iso2022_jp",
    ]));
    docs.extend(docs_from_files("ja", ja, &groff, selection, limit, 4));
    let mut ko = man(&["ko"]);
    ko.extend(cjk_test(&["euc_kr", "cp949", "johab", "iso2022_kr"]));
    docs.extend(docs_from_files("ko", ko, &groff, selection, limit, 6));
    docs.extend(docs_from_files(
        "cyrillic",
        man(&["ru", "uk", "sr"]),
        &groff,
        selection,
        limit,
        2,
    ));
    docs.extend(docs_from_files(
        "latin-eu",
        man(&[
            "de", "fr", "es", "it", "pt", "pt_BR", "pl", "nl", "sv", "cs", "hu", "tr", "ro",
        ]),
        &groff,
        selection,
        limit,
        1,
    ));

    // Scripts the man pages lack, from the translations of the installed programs (gettext
    // catalogs): two-byte scripts (Greek, Hebrew, Arabic and its Persian, Urdu, Pashto and
    // Uyghur forms, Armenian, Yiddish) and three-byte ones (Indic, Thai, Lao, Khmer, Myanmar,
    // Sinhala, Georgian, Ethiopic).
    let catalogs = |langs: &[&str]| catalog_files(roots, langs);
    docs.extend(docs_read_from_files(
        "abjad-greek",
        catalogs(ABJAD_GREEK),
        &read_mo,
        &ident,
        selection,
        limit,
        2,
    ));
    docs.extend(docs_read_from_files(
        "indic-sea",
        catalogs(INDIC_SEA),
        &read_mo,
        &ident,
        selection,
        limit,
        2,
    ));

    // Generated categories use a separate stream so they do not depend on the machine's files.
    let mut g = Rng::new(seed ^ 0x005E_ED0F_6E4E_7A7E);
    let code_samples: Vec<String> = docs
        .iter()
        .filter(|d| d.category == "rust" || d.category == "python")
        .map(|d| d.text.clone())
        .take(400)
        .collect();
    for i in 0..limit {
        docs.push(generated("json", i, gen_json(&mut g)));
        docs.push(generated("logs", i, gen_logs(&mut g)));
        docs.push(generated("base64", i, gen_base64(&mut g)));
        docs.push(generated("hex", i, gen_hex(&mut g)));
        docs.push(generated("uuid", i, gen_uuid(&mut g)));
        docs.push(generated(
            "transcript",
            i,
            gen_transcript(&mut g, &code_samples, 2, 6),
        ));
    }
    for i in 0..sessions {
        docs.push(generated(
            "session",
            i,
            gen_transcript(&mut g, &code_samples, 25, 60),
        ));
    }
    // Categories added in session 31 have their own stream, so the ones above stay identical.
    let mut g = Rng::new(seed ^ 0x0031_7EE5_C5F0_E301);
    for i in 0..limit {
        docs.push(generated("tree", i, gen_tree(&mut g)));
    }
    docs
}

/// The gettext catalogs of `langs`.
fn catalog_files(roots: &Roots, langs: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for lang in langs {
        walk(
            &roots.locale.join(lang).join("LC_MESSAGES"),
            &|p| p.extension().is_some_and(|e| e == "mo"),
            &mut files,
        );
    }
    files
}

/// Locales of the `abjad-greek` category (two-byte scripts).
const ABJAD_GREEK: &[&str] = &[
    "ar", "fa", "he", "el", "hy", "ur", "yi", "ps", "ug", "ckb", "sd",
];
/// Locales of the `indic-sea` category (three-byte scripts: Brahmic, Georgian, Ethiopic).
const INDIC_SEA: &[&str] = &[
    "hi", "bn", "ta", "th", "ka", "mr", "gu", "pa", "te", "kn", "ml", "si", "my", "km", "ne", "as",
];
/// Scripts that cost two to three times as many tokens per character as the others of their
/// category in o200k (Odia, Amharic, Lao: three-byte; Thaana of Dhivehi: two-byte). Each has its
/// own script count (`ferroloop::tokens::scripts`), but the machine has only a few catalogs in
/// each, so they are guard documents (`guard-scripts`: training only, held at or above their
/// floor) rather than evaluated categories.
const COSTLY_SCRIPTS: &[&str] = &["or", "am", "lo", "dv"];

/// The translations (`msgstr`, every plural form) of a gettext catalog (`.mo`), one per line.
/// Entries without a non-ASCII character are left out: they are untranslated copies of the
/// English source or bare format strings, which the other categories already cover.
fn read_mo(path: &Path) -> Option<String> {
    let data = fs::read(path).ok()?;
    let word = |at: usize, big_endian: bool| -> Option<usize> {
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        let v = if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        usize::try_from(v).ok()
    };
    // The magic number tells the byte order the catalog was written in.
    let big_endian = match word(0, false)? {
        0x9504_12de => false,
        0xde12_0495 => true,
        _ => return None,
    };
    let count = word(8, big_endian)?;
    let translations = word(16, big_endian)?;
    let mut out = String::new();
    // Entry 0 is the catalog's header (metadata, not text).
    for i in 1..count {
        let entry = translations.checked_add(8 * i)?;
        let (len, offset) = (word(entry, big_endian)?, word(entry + 4, big_endian)?);
        let Some(bytes) = data.get(offset..offset.checked_add(len)?) else {
            continue;
        };
        for form in bytes.split(|&b| b == 0) {
            match std::str::from_utf8(form) {
                Ok(text) if !text.is_ascii() => {
                    out.push_str(text.trim_end_matches('\n'));
                    out.push('\n');
                }
                _ => {}
            }
        }
    }
    Some(out)
}

/// File names for generated listings.
fn file_name(g: &mut Rng) -> String {
    const EXTENSIONS: &[&str] = &[
        "rs", "py", "md", "json", "toml", "ts", "js", "c", "h", "txt", "yaml", "lock", "sh",
    ];
    match g.range(0, 8) {
        0 => (*g.pick(&[
            "Cargo.toml",
            "README.md",
            "LICENSE",
            "Makefile",
            ".gitignore",
        ]))
        .to_owned(),
        1 => format!(
            "{}_{}.{}",
            ident(g).replace('-', "_"),
            g.range(0, 99),
            g.pick(EXTENSIONS)
        ),
        _ => format!("{}.{}", ident(g).replace('-', "_"), g.pick(EXTENSIONS)),
    }
}

/// `tree` output (box drawing characters; some with the private-use icons of `eza --icons`).
fn gen_tree(g: &mut Rng) -> String {
    const ICONS: &[char] = &[
        '\u{e5ff}', '\u{e7a8}', '\u{e606}', '\u{f15c}', '\u{e60b}', '\u{f023}',
    ];
    let target = g.range(800, 6_000);
    let icons = g.chance(0.2);
    let ascii_root = if g.chance(0.5) {
        ".".to_owned()
    } else {
        format!("{}/", ident(g))
    };
    let mut s = ascii_root + "\n";
    // The open ancestors' columns: whether each still has children below (`│   `) or not.
    let mut stack: Vec<bool> = Vec::new();
    let (mut dirs, mut files) = (0, 0);
    while s.len() < target {
        let depth = stack.len();
        // The root's entries end only with the listing.
        let last = depth > 0 && g.chance(0.25);
        for &open in &stack {
            s.push_str(if open { "│   " } else { "    " });
        }
        s.push_str(if last { "└── " } else { "├── " });
        if icons {
            s.push(*g.pick(ICONS));
            s.push(' ');
        }
        let is_dir = depth < 5 && g.chance(0.25);
        if is_dir {
            s.push_str(&ident(g).replace('-', "_"));
            dirs += 1;
            s.push('\n');
            stack.push(!last);
        } else {
            s.push_str(&file_name(g));
            files += 1;
            s.push('\n');
            if last {
                // Close this level and, sometimes, the ones above it.
                while stack.pop().is_some() && g.chance(0.4) {}
            }
        }
    }
    s.push_str(&format!("\n{dirs} directories, {files} files\n"));
    s
}

/// A table of figures drawn with box-drawing characters, as benchmark reports and table crates
/// print them (light, rounded or heavy borders; `┆` or `│` between columns; a `═`, `━` or `─`
/// rule under the header): mostly box characters, spaces and digit runs.
fn gen_box_table(g: &mut Rng) -> String {
    // The top rule's corners and tee, then the bottom rule's.
    const FRAMES: &[[char; 6]] = &[
        ['┌', '┬', '┐', '└', '┴', '┘'],
        ['╭', '┬', '╮', '╰', '┴', '╯'],
        ['┏', '┳', '┓', '┗', '┻', '┛'],
    ];
    // The header rule: its ends, its line and its crossings.
    const HEADER_RULES: &[(char, char, char, char)] = &[
        ('╞', '═', '╪', '╡'),
        ('┡', '━', '╇', '┩'),
        ('├', '─', '┼', '┤'),
    ];
    let frame = *g.pick(FRAMES);
    let (rule_left, rule, rule_cross, rule_right) = *g.pick(HEADER_RULES);
    let heavy = frame[0] == '┏';
    let (line, outer) = if heavy {
        ('━', '┃')
    } else {
        ('─', '│')
    };
    let inner = if g.chance(0.5) { '┆' } else { outer };
    let columns = g.range(3, 9);
    let unit = *g.pick(&["", "", " ms", " µs", "%", " MB/s", "x"]);
    let decimals = g.range(0, 4);
    let mut rows: Vec<Vec<String>> = vec![(0..columns).map(|_| ident(g)).collect()];
    let target = g.range(800, 5_000);
    let mut size = 0;
    while size < target {
        let mut row = vec![ident(g)];
        for _ in 1..columns {
            let value = g.range(0, 100_000) as f64 / 10f64.powi(g.range(0, 4) as i32);
            row.push(format!("{value:.decimals$}{unit}"));
        }
        size += row.iter().map(|c| c.len() + 3).sum::<usize>();
        rows.push(row);
    }
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let rule_line = |left: char, fill: char, cross: char, right: char| {
        let cells: Vec<String> = widths
            .iter()
            .map(|&w| fill.to_string().repeat(w + 2))
            .collect();
        format!("{left}{}{right}\n", cells.join(&cross.to_string()))
    };
    let mut s = rule_line(frame[0], line, frame[1], frame[2]);
    for (i, row) in rows.iter().enumerate() {
        s.push(outer);
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                s.push(inner);
            }
            let pad = " ".repeat(widths[c] - cell.chars().count());
            if c == 0 {
                s.push_str(&format!(" {cell}{pad} "));
            } else {
                s.push_str(&format!(" {pad}{cell} "));
            }
        }
        s.push(outer);
        s.push('\n');
        if i == 0 {
            s.push_str(&rule_line(rule_left, rule, rule_cross, rule_right));
        }
    }
    s.push_str(&rule_line(frame[3], line, frame[4], frame[5]));
    s
}

fn generated(category: &'static str, n: usize, text: String) -> Doc {
    Doc {
        category,
        source: format!("generated:{category}:{n}"),
        text,
    }
}

/// Common English words for generated identifiers and sentences.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "at",
    "by",
    "this",
    "from",
    "or",
    "an",
    "are",
    "not",
    "but",
    "which",
    "have",
    "all",
    "can",
    "will",
    "one",
    "when",
    "there",
    "file",
    "error",
    "value",
    "request",
    "response",
    "user",
    "name",
    "path",
    "config",
    "server",
    "client",
    "token",
    "message",
    "content",
    "result",
    "status",
    "update",
    "create",
    "delete",
    "list",
    "item",
    "data",
    "time",
    "date",
    "count",
    "index",
    "key",
    "type",
    "model",
    "build",
    "test",
    "check",
    "parse",
    "read",
    "write",
    "open",
    "close",
    "start",
    "stop",
    "run",
    "task",
    "job",
    "queue",
    "worker",
    "cache",
    "session",
    "account",
    "project",
    "branch",
    "commit",
    "version",
    "package",
    "module",
    "function",
    "method",
    "class",
    "object",
    "array",
    "string",
    "number",
    "buffer",
    "stream",
    "event",
    "handler",
    "service",
    "database",
    "table",
    "column",
    "query",
    "record",
    "field",
    "schema",
    "timeout",
    "retry",
    "failed",
    "success",
    "warning",
    "missing",
    "invalid",
    "unexpected",
    "connection",
    "network",
    "address",
    "port",
    "host",
    "local",
    "remote",
    "source",
    "target",
    "output",
    "input",
    "default",
    "option",
    "feature",
    "support",
    "release",
    "issue",
    "fix",
];

fn sentence(g: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        let word = g.pick::<&str>(WORDS);
        s.push_str(word);
    }
    if let Some(first) = s.get(0..1) {
        let upper = first.to_uppercase();
        s.replace_range(0..1, &upper);
    }
    s.push('.');
    s
}

fn sentence_between(g: &mut Rng, lo: usize, hi: usize) -> String {
    let n = g.range(lo, hi);
    sentence(g, n)
}

fn ident(g: &mut Rng) -> String {
    let n = g.range(1, 4);
    let parts: Vec<&str> = (0..n).map(|_| *g.pick(WORDS)).collect();
    match g.range(0, 3) {
        0 => parts.join("_"),
        1 => parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    (*p).to_owned()
                } else {
                    let mut c = p.chars();
                    c.next()
                        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                        .unwrap_or_default()
                }
            })
            .collect(),
        _ => parts.join("-"),
    }
}

fn json_value(g: &mut Rng, depth: usize) -> Value {
    match g.range(0, if depth > 3 { 5 } else { 8 }) {
        0 => json!(g.range(0, 100_000)),
        1 => json!(g.range(0, 1_000_000) as f64 / 1000.0),
        2 => json!(g.chance(0.5)),
        3 | 4 => {
            if g.chance(0.5) {
                json!(sentence_between(g, 2, 14))
            } else {
                json!(ident(g))
            }
        }
        5 | 6 => {
            let mut map = serde_json::Map::new();
            for _ in 0..g.range(1, 7) {
                map.insert(ident(g), json_value(g, depth + 1));
            }
            Value::Object(map)
        }
        _ => Value::Array(
            (0..g.range(1, 6))
                .map(|_| json_value(g, depth + 1))
                .collect(),
        ),
    }
}

fn gen_json(g: &mut Rng) -> String {
    let target = g.range(800, 6_000);
    let mut items = Vec::new();
    let mut size = 0;
    while size < target {
        let mut map = serde_json::Map::new();
        map.insert("id".into(), json!(g.range(1, 1_000_000)));
        for _ in 0..g.range(2, 8) {
            map.insert(ident(g), json_value(g, 1));
        }
        let v = Value::Object(map);
        size += v.to_string().len();
        items.push(v);
    }
    let doc = json!({ "data": items, "total": items.len() });
    if g.chance(0.5) {
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    } else {
        doc.to_string()
    }
}

fn hex(g: &mut Rng, n: usize) -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    (0..n).map(|_| HEX[g.range(0, 16)] as char).collect()
}

fn uuid(g: &mut Rng) -> String {
    format!(
        "{}-{}-4{}-a{}-{}",
        hex(g, 8),
        hex(g, 4),
        hex(g, 3),
        hex(g, 3),
        hex(g, 12)
    )
}

fn timestamp(g: &mut Rng) -> String {
    format!(
        "2025-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        g.range(1, 13),
        g.range(1, 29),
        g.range(0, 24),
        g.range(0, 60),
        g.range(0, 60),
        g.range(0, 1000)
    )
}

fn gen_logs(g: &mut Rng) -> String {
    let target = g.range(800, 6_000);
    let style = g.range(0, 4);
    let mut s = String::new();
    while s.len() < target {
        let line = match style {
            0 => format!(
                "{}.{}.{}.{} - - [{:02}/Mar/2025:{:02}:{:02}:{:02} +0000] \"{} /api/v1/{}/{} HTTP/1.1\" {} {} \"-\" \"Mozilla/5.0 (X11; Linux x86_64)\"\n",
                g.range(1, 255),
                g.range(0, 255),
                g.range(0, 255),
                g.range(1, 255),
                g.range(1, 29),
                g.range(0, 24),
                g.range(0, 60),
                g.range(0, 60),
                g.pick(&["GET", "POST", "PUT", "DELETE"]),
                ident(g),
                g.range(1, 99_999),
                g.pick(&[200, 201, 204, 301, 404, 500, 503]),
                g.range(0, 80_000)
            ),
            1 => format!(
                "{} {} [{}::{}] {} {}={} elapsed={}ms request_id={}\n",
                timestamp(g),
                g.pick(&["INFO ", "DEBUG", "WARN ", "ERROR", "TRACE"]),
                ident(g).replace('-', "_"),
                ident(g).replace('-', "_"),
                sentence_between(g, 3, 10),
                ident(g),
                g.range(0, 10_000),
                g.range(0, 5_000),
                hex(g, 16)
            ),
            2 => {
                if g.chance(0.15) {
                    format!(
                        "Traceback (most recent call last):\n  File \"/srv/app/{}/{}.py\", line {}, in {}\n    {}({})\nValueError: {}\n",
                        ident(g).replace('-', "_"),
                        ident(g).replace('-', "_"),
                        g.range(1, 900),
                        ident(g).replace('-', "_"),
                        ident(g).replace('-', "_"),
                        ident(g).replace('-', "_"),
                        sentence(g, 6)
                    )
                } else {
                    format!(
                        "{{\"ts\":\"{}\",\"level\":\"{}\",\"msg\":\"{}\",\"user\":\"{}\",\"latency_ms\":{}}}\n",
                        timestamp(g),
                        g.pick(&["info", "warn", "error"]),
                        sentence_between(g, 3, 9),
                        uuid(g),
                        g.range(1, 3000)
                    )
                }
            }
            _ => format!(
                "   Compiling {} v{}.{}.{}\n{}: {} `{}` at src/{}.rs:{}:{}\n",
                ident(g),
                g.range(0, 3),
                g.range(0, 40),
                g.range(0, 20),
                g.pick(&["warning", "error[E0308]", "note"]),
                sentence_between(g, 3, 8),
                ident(g).replace('-', "_"),
                ident(g).replace('-', "_"),
                g.range(1, 2000),
                g.range(1, 100)
            ),
        };
        s.push_str(&line);
    }
    s
}

fn base64_of(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len() / 3 * 4 + 4);
    for c in bytes.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn gen_base64(g: &mut Rng) -> String {
    let n = g.range(600, 4_500);
    let bytes: Vec<u8> = (0..n).map(|_| g.next_u64() as u8).collect();
    let b64 = base64_of(&bytes);
    match g.range(0, 3) {
        0 => b64,
        1 => {
            let mut s = String::new();
            for (i, c) in b64.chars().enumerate() {
                if i > 0 && i % 76 == 0 {
                    s.push('\n');
                }
                s.push(c);
            }
            s
        }
        _ => format!("data:image/png;base64,{b64}"),
    }
}

fn gen_hex(g: &mut Rng) -> String {
    let target = g.range(800, 6_000);
    let mut s = String::new();
    let style = g.range(0, 3);
    let mut offset = 0;
    while s.len() < target {
        match style {
            0 => s.push_str(&format!("{}  {}\n", hex(g, 64), ident(g))),
            1 => {
                let words: Vec<String> = (0..8).map(|_| hex(g, 4)).collect();
                s.push_str(&format!(
                    "{offset:08x}: {}  ................\n",
                    words.join(" ")
                ));
                offset += 16;
            }
            _ => s.push_str(&hex(g, 128)),
        }
    }
    s
}

fn gen_uuid(g: &mut Rng) -> String {
    let target = g.range(800, 6_000);
    let mut s = String::new();
    let style = g.range(0, 2);
    while s.len() < target {
        if style == 0 {
            s.push_str(&uuid(g));
            s.push('\n');
        } else {
            s.push_str(&format!("{} {} {}\n", ident(g), uuid(g), uuid(g)));
        }
    }
    s
}

/// An Anthropic Messages request body of a coding agent: tools, user turns, assistant text and
/// tool calls, tool results holding code, logs and JSON.
pub fn gen_transcript(g: &mut Rng, code: &[String], min_turns: usize, max_turns: usize) -> String {
    let tools = json!([
        {"name": "read_file", "description": "Read a file from the workspace and return its contents.",
         "input_schema": {"type": "object", "properties": {"path": {"type": "string", "description": "Path relative to the workspace root"}}, "required": ["path"]}},
        {"name": "bash", "description": "Run a shell command and return stdout and stderr.",
         "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "timeout_ms": {"type": "integer"}}, "required": ["command"]}},
        {"name": "edit_file", "description": "Replace an exact string in a file.",
         "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["path", "old", "new"]}}
    ]);
    let mut messages = vec![json!({"role": "user", "content": sentence_between(g, 8, 30)})];
    for turn in 0..g.range(min_turns, max_turns + 1) {
        let id = format!(
            "toolu_01{}",
            base64_of(&g.next_u64().to_le_bytes()).replace(['+', '/', '='], "x")
        );
        let (name, input, result) = match g.range(0, 4) {
            0 => {
                let path = format!(
                    "src/{}/{}.rs",
                    ident(g).replace('-', "_"),
                    ident(g).replace('-', "_")
                );
                let body = if code.is_empty() {
                    gen_logs(g)
                } else {
                    g.pick(code).clone()
                };
                ("read_file", json!({"path": path}), body)
            }
            1 => (
                "bash",
                json!({"command": format!("cargo test -p {} -- {}", ident(g), ident(g))}),
                gen_logs(g),
            ),
            2 => (
                "bash",
                json!({"command": format!("curl -s https://api.example.com/v1/{}", ident(g))}),
                gen_json(g),
            ),
            _ => (
                "edit_file",
                json!({"path": format!("src/{}.py", ident(g).replace('-', "_")), "old": sentence(g, 5), "new": sentence(g, 7)}),
                "The file has been updated.".to_owned(),
            ),
        };
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": sentence_between(g, 5, 25)},
            {"type": "tool_use", "id": id, "name": name, "input": input}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": result, "is_error": turn % 7 == 6}
        ]}));
    }
    messages.push(json!({"role": "assistant", "content": sentence_between(g, 10, 40)}));
    json!({"model": "claude-sonnet-4-5", "max_tokens": 32000,
           "system": "You are a coding agent. Use the tools to inspect and change the workspace. Be concise.",
           "tools": tools, "messages": messages})
    .to_string()
}

/// Chat lines with emoji (ZWJ sequences, skin tones and variation selectors among them).
fn gen_emoji_chat(g: &mut Rng) -> String {
    const EMOJI: &[&str] = &[
        "😀",
        "😂",
        "🎉",
        "🚀",
        "👍",
        "👍🏽",
        "🔥",
        "❤️",
        "✅",
        "❌",
        "⚠️",
        "🙏",
        "👏",
        "💯",
        "🤔",
        "😅",
        "🐛",
        "✨",
        "📦",
        "🔧",
        "👀",
        "🙌",
        "😭",
        "🥳",
        "💡",
        "📝",
        "⭐",
        "👨‍💻",
        "🤦‍♂️",
        "☕",
    ];
    const NAMES: &[&str] = &["alice", "bob", "carol", "dave", "erin", "frank", "grace"];
    let target = g.range(800, 6_000);
    let style = g.range(0, 4);
    let mut s = String::new();
    while s.len() < target {
        let mut line = match style {
            0 => format!("{}: ", g.pick(NAMES)),
            1 => format!(
                "[{:02}:{:02}] <{}> ",
                g.range(0, 24),
                g.range(0, 60),
                g.pick(NAMES)
            ),
            _ => String::new(),
        };
        // Style 3 is emoji only (reactions), the others words with emoji among them.
        for i in 0..g.range(3, 14) {
            if i > 0 && style != 3 {
                line.push(' ');
            }
            if style == 3 || g.chance(0.2) {
                for _ in 0..g.range(1, 4) {
                    line.push_str(g.pick::<&str>(EMOJI));
                }
            } else {
                line.push_str(g.pick::<&str>(WORDS));
            }
        }
        line.push_str(g.pick::<&str>(&["", "!", "!!", ".", " 🎉", " 🚀", "?"]));
        line.push('\n');
        s.push_str(&line);
    }
    s
}

/// Lines of words and numbers with some in full-width forms (U+FF01–U+FF5E: `ＡＢＣ１２３`), as
/// Japanese and Chinese text writes Latin letters and digits. o200k spends one to two tokens
/// on each; no source on the machine has enough of them.
fn gen_fullwidth(g: &mut Rng) -> String {
    let target = g.range(600, 4_000);
    let share = [0.2, 0.5, 1.0][g.range(0, 3)];
    // The ideographic space and full stop (counted as kana: their lead is `E3`) in a share of
    // their own, told by the length already drawn: with the words' share, the fit could price
    // full-width words as ideographic spaces. (The documents after these changed all the same,
    // since the texts' lengths, and so the draws, did.)
    let spaces = [0.0, 0.3, 1.0][target % 3];
    let mut s = String::new();
    while s.len() < target {
        for i in 0..g.range(3, 12) {
            if i > 0 {
                s.push(if g.chance(spaces) { '\u{3000}' } else { ' ' });
            }
            let word = if g.chance(0.3) {
                g.range(1, 100_000).to_string()
            } else {
                (*g.pick::<&str>(WORDS)).to_owned()
            };
            if g.chance(share) {
                // ASCII `!`–`~` map to U+FF01–U+FF5E.
                s.extend(word.chars().map(|c| {
                    char::from_u32(u32::from(c) + 0xFEE0)
                        .filter(|_| c.is_ascii_graphic())
                        .unwrap_or(c)
                }));
            } else {
                s.push_str(&word);
            }
        }
        s.push_str(if g.chance(spaces) { "。\n" } else { ".\n" });
    }
    s
}

/// English words with `th`, the digraph [`ClassCounts::th_pairs`] counts (the model may price it
/// below zero: a discount on English letters).
///
/// [`ClassCounts::th_pairs`]: ferroloop::tokens::ClassCounts::th_pairs
const TH_WORDS: &[&str] = &[
    "the", "that", "this", "with", "there", "they", "them", "then", "than", "other", "think",
    "through", "those", "these", "both", "their", "thing", "three", "without", "another",
    "nothing", "either", "whether", "month", "north", "truth", "path", "method", "thread", "width",
    "depth", "length", "math", "author", "further", "together", "although", "thus",
];

/// Syllables with `th` for made-up words, which the vocabularies split finely.
const TH_SYLLABLES: &[&str] = &[
    "th", "tha", "the", "thi", "tho", "thu", "ath", "eth", "oth", "Th",
];

/// Text as dense in `th` as text gets: sentences of English words that have it (one token
/// each in every vocabulary), or of made-up words built from `th` syllables (`thathi othu`,
/// several tokens each). Held at their guard floors (the made-up words at the placeholder
/// text's) so that the discount on `th` cannot price either far below its exact count.
fn gen_th(g: &mut Rng, made_up: bool) -> String {
    let target = g.range(600, 4_000);
    let mut s = String::new();
    while s.len() < target {
        for i in 0..g.range(4, 14) {
            if i > 0 {
                s.push(' ');
            }
            if made_up {
                for _ in 0..g.range(1, 5) {
                    s.push_str(g.pick::<&str>(TH_SYLLABLES));
                }
            } else {
                s.push_str(g.pick::<&str>(TH_WORDS));
            }
        }
        s.push_str(".\n");
    }
    s
}

/// The classic placeholder text's vocabulary (Cicero's *De finibus* as typesetters mangled it).
const LOREM: &[&str] = &[
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
    "incididunt",
    "ut",
    "labore",
    "et",
    "dolore",
    "magna",
    "aliqua",
    "enim",
    "ad",
    "minim",
    "veniam",
    "quis",
    "nostrud",
    "exercitation",
    "ullamco",
    "laboris",
    "nisi",
    "aliquip",
    "ex",
    "ea",
    "commodo",
    "consequat",
    "duis",
    "aute",
    "irure",
    "in",
    "reprehenderit",
    "voluptate",
    "velit",
    "esse",
    "cillum",
    "fugiat",
    "nulla",
    "pariatur",
    "excepteur",
    "sint",
    "occaecat",
    "cupidatat",
    "non",
    "proident",
    "sunt",
    "culpa",
    "qui",
    "officia",
    "deserunt",
    "mollit",
    "anim",
    "id",
    "est",
    "laborum",
    "pellentesque",
    "habitant",
    "morbi",
    "tristique",
    "senectus",
    "netus",
    "malesuada",
    "fames",
    "ac",
    "turpis",
    "egestas",
    "vestibulum",
    "mauris",
];

/// Guard documents for the fit's training half only (categories `guard-*`, never evaluated):
/// placeholder text (lorem ipsum sentences, and a short phrase repeated) and one-letter words,
/// which no source on the machine has but real inputs may. Without them the fit is free to price such text (Latin
/// words with no accent and few rare letters) like English, far below its exact count in every
/// vocabulary; an under-estimate costs a rejected request.
pub fn guard_docs(roots: &Roots, selection: &Selection) -> Vec<Doc> {
    let seed = selection.seed;
    let mut g = Rng::new(seed ^ 0x6C6F_7265_6D00);
    let mut docs = docs_read_from_files(
        "guard-scripts",
        catalog_files(roots, COSTLY_SCRIPTS),
        &read_mo,
        &|s| s,
        selection,
        24,
        1,
    );
    for n in 0..12 {
        let target = g.range(600, 4000);
        let mut text = String::new();
        while text.len() < target {
            let words = g.range(6, 18);
            let mut sentence = String::new();
            for i in 0..words {
                if i > 0 {
                    sentence.push_str(if g.chance(0.12) { ", " } else { " " });
                }
                sentence.push_str(g.pick::<&str>(LOREM));
            }
            if let Some(first) = sentence.get(0..1) {
                let upper = first.to_uppercase();
                sentence.replace_range(0..1, &upper);
            }
            sentence.push_str(if g.chance(0.2) { ".\n\n" } else { ". " });
            text.push_str(&sentence);
        }
        docs.push(generated("guard-lorem", n, text));
    }
    for (n, phrase) in ["lorem ipsum dolor ", "Lorem ipsum dolor sit amet. "]
        .iter()
        .enumerate()
    {
        let times = g.range(40, 120);
        docs.push(generated("guard-lorem", 12 + n, phrase.repeat(times)));
    }
    // Emoji (four-byte characters, a few with a three-byte variation selector): no source on
    // the machine has them, so without these the fit is free to price them at nothing.
    for n in 0..16 {
        docs.push(generated("guard-emoji", n, gen_emoji_chat(&mut g)));
    }
    for n in 0..12 {
        docs.push(generated("guard-fullwidth", n, gen_fullwidth(&mut g)));
    }
    for n in 0..6 {
        docs.push(generated("guard-th", n, gen_th(&mut g, false)));
        docs.push(generated("guard-th-made-up", n, gen_th(&mut g, true)));
    }
    // One-letter words: the shortest words there are, one token each with their space.
    let times = g.range(500, 2000);
    docs.push(generated("guard-letters", 0, "a ".repeat(times)));
    let mut letters = String::new();
    for _ in 0..g.range(500, 2000) {
        letters.push(char::from(b'a' + g.range(0, 26) as u8));
        letters.push(' ');
    }
    docs.push(generated("guard-letters", 1, letters));
    // Tables of figures in box-drawing frames, from a generator of their own so that the
    // documents above stay as they were.
    let mut t = Rng::new(seed ^ 0x7461_626C_6500);
    for n in 0..12 {
        docs.push(generated("guard-table", n, gen_box_table(&mut t)));
    }
    // Scripts no vocabulary knows well and symbol blocks (the `rare_script` and `symbols`
    // counts), from a generator of their own so that the documents above stay as they were.
    let mut r = Rng::new(seed ^ 0x7261_7265_0000);
    for (n, script) in RARE_SCRIPTS.iter().enumerate() {
        docs.push(generated(
            "guard-rare-scripts",
            n,
            gen_rare_script(&mut r, script),
        ));
    }
    for n in 0..16 {
        docs.push(generated("guard-symbols", n, gen_symbols(&mut r)));
    }
    for n in 0..12 {
        docs.push(generated(
            "guard-emoji-sequences",
            n,
            gen_emoji_sequences(&mut r),
        ));
    }
    // Four-byte characters other than emoji (the `rare_four` count), from a generator of their
    // own.
    let mut f = Rng::new(seed ^ 0x666F_7572_0000);
    for (n, script) in RARE_FOUR.iter().enumerate() {
        docs.push(generated(
            "guard-rare-four",
            n,
            gen_rare_script(&mut f, script),
        ));
    }
    // Chinese with CJK Extension A ideographs among its words (the `rare_script` count of the
    // `script` kind), from a generator of its own. Text of Extension A alone is the `other`
    // kind, which the rare scripts above hold already.
    let mut h = Rng::new(seed ^ 0x6578_745F_6100);
    for n in 0..8 {
        docs.push(generated(
            "guard-han-extension-a",
            n,
            gen_han_with_extension_a(&mut h),
        ));
    }
    // Vietnamese (the `latin_ext_additional` count): no man page on the machine is in it, and
    // its catalogs are the only source.
    docs.extend(docs_read_from_files(
        "guard-vietnamese",
        catalog_files(roots, &["vi"]),
        &read_mo,
        &|s| s,
        selection,
        24,
        1,
    ));
    docs
}

/// Lines of miscellaneous symbols and dingbats (the `misc_symbols` count), generated for the
/// second step that prices them (`symbols.rs`), never rows of the main fit: even-numbered
/// documents are the training half, odd-numbered ones held out.
pub fn misc_symbol_docs(selection: &Selection, category: &'static str) -> Vec<(Doc, bool)> {
    second_step_docs(selection, category, 0x6D69_7363_0000, gen_misc_symbols)
}

/// The 48 documents of a second step, drawn by `generate` from a generator seeded with the
/// selection's seed and `salt`: even-numbered documents are the training half, odd-numbered
/// ones held out.
fn second_step_docs(
    selection: &Selection,
    category: &'static str,
    salt: u64,
    generate: fn(&mut Rng) -> String,
) -> Vec<(Doc, bool)> {
    let mut g = Rng::new(selection.seed ^ salt);
    (0..48)
        .map(|n| (generated(category, n, generate(&mut g)), n % 2 == 0))
        .collect()
}

/// Symbols of the `misc_symbols` count (U+2600–U+27BF, U+2B00–U+2BFF) as text uses them:
/// ratings, check boxes and marks, bullets, weather and card signs, dingbats, arrows.
const MISC_SYMBOLS: &str =
    "★☆☐☑☒♥♡♠♣♦♪♫☀☁☂☎☕☺☹♻⚙⚡⚠⚑⚐✓✔✗✘✖✕✂✈✉✏✒✎✦✧✩✪✱✳❄❖❗❓❤➔➜➤➕➖➗⬆⬇⬅⬛⬜⭐⭕";

/// Lines with symbols of [`MISC_SYMBOLS`]: ratings (five stars, some filled, before a few
/// words), task lists (a box or mark before a few words), table rows of marks, or runs of
/// symbols alone.
fn gen_misc_symbols(g: &mut Rng) -> String {
    let style = g.range(0, 4);
    let target = g.range(600, 3_000);
    let symbols: Vec<char> = MISC_SYMBOLS.chars().collect();
    let mut s = String::new();
    while s.len() < target {
        match style {
            0 => {
                let filled = g.range(0, 6);
                s.push_str(&"★".repeat(filled));
                s.push_str(&"☆".repeat(5 - filled));
                for _ in 0..g.range(1, 6) {
                    s.push(' ');
                    s.push_str(g.pick::<&str>(WORDS));
                }
            }
            1 => {
                s.push(*g.pick(&symbols));
                for _ in 0..g.range(1, 6) {
                    s.push(' ');
                    s.push_str(g.pick::<&str>(WORDS));
                }
            }
            2 => {
                s.push_str("| ");
                s.push_str(g.pick::<&str>(WORDS));
                for _ in 0..g.range(2, 6) {
                    s.push_str(" | ");
                    s.push(*g.pick(&symbols));
                }
                s.push_str(" |");
            }
            _ => {
                for _ in 0..g.range(4, 24) {
                    s.push(*g.pick(&symbols));
                    if g.chance(0.3) {
                        s.push(' ');
                    }
                }
            }
        }
        s.push('\n');
    }
    s
}

/// Phonetic transcriptions (the `phonetic` count: IPA Extensions and Spacing Modifier Letters,
/// U+0250–U+02FF), generated for the second step that prices them (`phonetic.rs`), never rows
/// of the main fit: even-numbered documents are the training half, odd-numbered ones held out.
pub fn phonetic_docs(selection: &Selection, category: &'static str) -> Vec<(Doc, bool)> {
    second_step_docs(selection, category, 0x6970_6100_0000, gen_phonetic)
}

/// English words and a broad transcription of each (British, with a few American forms), as a
/// dictionary or a phonetics text writes them.
const TRANSCRIBED: [(&str, &str); 96] = [
    ("the", "ðə"),
    ("of", "əv"),
    ("and", "ænd"),
    ("to", "tuː"),
    ("in", "ɪn"),
    ("is", "ɪz"),
    ("that", "ðæt"),
    ("it", "ɪt"),
    ("was", "wɒz"),
    ("for", "fɔː"),
    ("on", "ɒn"),
    ("are", "ɑː"),
    ("with", "wɪð"),
    ("as", "æz"),
    ("his", "hɪz"),
    ("they", "ðeɪ"),
    ("be", "biː"),
    ("at", "æt"),
    ("one", "wʌn"),
    ("have", "hæv"),
    ("this", "ðɪs"),
    ("from", "frɒm"),
    ("or", "ɔː"),
    ("by", "baɪ"),
    ("word", "wɜːd"),
    ("but", "bʌt"),
    ("what", "wɒt"),
    ("some", "sʌm"),
    ("we", "wiː"),
    ("can", "kæn"),
    ("out", "aʊt"),
    ("other", "ˈʌðə"),
    ("were", "wɜː"),
    ("all", "ɔːl"),
    ("there", "ðeə"),
    ("when", "wɛn"),
    ("up", "ʌp"),
    ("use", "juːz"),
    ("your", "jɔː"),
    ("how", "haʊ"),
    ("said", "sɛd"),
    ("each", "iːtʃ"),
    ("she", "ʃiː"),
    ("which", "wɪtʃ"),
    ("do", "duː"),
    ("time", "taɪm"),
    ("will", "wɪl"),
    ("way", "weɪ"),
    ("about", "əˈbaʊt"),
    ("many", "ˈmɛni"),
    ("then", "ðɛn"),
    ("write", "raɪt"),
    ("would", "wʊd"),
    ("like", "laɪk"),
    ("so", "səʊ"),
    ("these", "ðiːz"),
    ("her", "hɜː"),
    ("long", "lɒŋ"),
    ("make", "meɪk"),
    ("thing", "θɪŋ"),
    ("see", "siː"),
    ("look", "lʊk"),
    ("more", "mɔː"),
    ("day", "deɪ"),
    ("could", "kʊd"),
    ("go", "ɡəʊ"),
    ("come", "kʌm"),
    ("number", "ˈnʌmbə"),
    ("sound", "saʊnd"),
    ("no", "nəʊ"),
    ("most", "məʊst"),
    ("people", "ˈpiːpəl"),
    ("over", "ˈəʊvə"),
    ("know", "nəʊ"),
    ("water", "ˈwɔːtə"),
    ("call", "kɔːl"),
    ("first", "fɜːst"),
    ("who", "huː"),
    ("down", "daʊn"),
    ("thought", "θɔːt"),
    ("measure", "ˈmɛʒə"),
    ("church", "tʃɜːtʃ"),
    ("judge", "dʒʌdʒ"),
    ("butter", "ˈbʌtɚ"),
    ("better", "ˈbɛɾɚ"),
    ("dog", "dɒɡ"),
    ("pronunciation", "prəˌnʌnsiˈeɪʃən"),
    ("international", "ˌɪntəˈnæʃənəl"),
    ("phonetic", "fəˈnɛtɪk"),
    ("alphabet", "ˈælfəbɛt"),
    ("language", "ˈlæŋɡwɪdʒ"),
    ("vision", "ˈvɪʒən"),
    ("yellow", "ˈjɛləʊ"),
    ("father", "ˈfɑːðə"),
    ("bird", "bɜːd"),
    ("red", "ɹɛd"),
];

/// Consonants and vowels of narrow transcriptions of other languages (IPA letters beside the
/// ASCII ones and `θ`, `ŋ`, `ç`), with the modifiers that follow them.
const IPA_CONSONANTS: [&str; 30] = [
    "p", "b", "t", "d", "k", "ɡ", "ʔ", "m", "n", "ŋ", "ɲ", "ɾ", "r", "ʀ", "f", "v", "θ", "s", "z",
    "ʃ", "ʒ", "ç", "x", "χ", "ʁ", "ɣ", "h", "l", "ɬ", "j",
];
const IPA_VOWELS: [&str; 18] = [
    "i", "y", "ɪ", "e", "ø", "ɛ", "œ", "æ", "a", "ɐ", "ɑ", "ɒ", "ɔ", "o", "ʊ", "u", "ʌ", "ə",
];

/// Transcriptions: dictionary entries (a word, its transcription between slashes and a gloss),
/// transcribed sentences, table rows of a word's British and American forms, or narrow
/// transcriptions of made-up words with stress, length and aspiration.
fn gen_phonetic(g: &mut Rng) -> String {
    let style = g.range(0, 4);
    let target = g.range(600, 3_000);
    let mut s = String::new();
    while s.len() < target {
        match style {
            0 => {
                let (word, ipa) = g.pick(&TRANSCRIBED);
                s.push_str(&format!("{word} /{ipa}/"));
                for _ in 0..g.range(2, 8) {
                    s.push(' ');
                    s.push_str(g.pick::<&str>(WORDS));
                }
            }
            1 => {
                s.push('/');
                for k in 0..g.range(4, 14) {
                    if k > 0 {
                        s.push(' ');
                    }
                    s.push_str(g.pick(&TRANSCRIBED).1);
                }
                s.push('/');
            }
            2 => {
                let (word, ipa) = g.pick(&TRANSCRIBED);
                let american = ipa.replace("əʊ", "oʊ").replace('ɒ', "ɑ").replace("ː", "ːɹ");
                s.push_str(&format!("| {word} | /{ipa}/ | /{american}/ |"));
            }
            _ => {
                s.push('[');
                for k in 0..g.range(3, 10) {
                    if k > 0 {
                        s.push(' ');
                    }
                    if g.chance(0.4) {
                        s.push('ˈ');
                    }
                    for _ in 0..g.range(1, 4) {
                        s.push_str(g.pick::<&str>(&IPA_CONSONANTS));
                        if g.chance(0.15) {
                            s.push('ʰ');
                        }
                        s.push_str(g.pick::<&str>(&IPA_VOWELS));
                        if g.chance(0.25) {
                            s.push('ː');
                        }
                    }
                }
                s.push(']');
            }
        }
        s.push('\n');
    }
    s
}

/// A script of the `rare_script` count (`ferroloop::tokens::scripts`) for `guard-rare-scripts`.
struct RareScript {
    /// The ranges its words' letters are drawn from (inclusive code points).
    letters: &'static [(u32, u32)],
    /// Marks that may follow a letter (vowel signs, subjoined letters, final jamo).
    marks: &'static [(u32, u32)],
    /// What separates its words.
    separator: &'static str,
}

impl RareScript {
    /// A script of letters alone, its words separated by spaces (most of them).
    const fn words(letters: &'static [(u32, u32)]) -> RareScript {
        RareScript {
            letters,
            marks: &[],
            separator: " ",
        }
    }
}

/// The scripts of `guard-rare-scripts`. No catalog on the machine has enough text in any of
/// them to be a category, and each costs o200k and cl100k about one token per UTF-8 byte.
const RARE_SCRIPTS: [RareScript; 16] = [
    // Tibetan.
    RareScript {
        letters: &[(0x0F40, 0x0F6C)],
        marks: &[(0x0F71, 0x0F7D), (0x0F90, 0x0FB8)],
        separator: "\u{0F0B}",
    },
    // Mongolian.
    RareScript::words(&[(0x1820, 0x1877)]),
    // Cherokee.
    RareScript::words(&[(0x13A0, 0x13F4)]),
    // Canadian syllabics.
    RareScript::words(&[(0x1401, 0x166C)]),
    // Runic.
    RareScript {
        letters: &[(0x16A0, 0x16EA)],
        marks: &[],
        separator: "\u{16EB}",
    },
    // Ogham.
    RareScript {
        letters: &[(0x1681, 0x169A)],
        marks: &[],
        separator: "\u{1680}",
    },
    // Ol Chiki.
    RareScript::words(&[(0x1C5A, 0x1C7D)]),
    // Tifinagh.
    RareScript::words(&[(0x2D30, 0x2D67)]),
    // Glagolitic.
    RareScript::words(&[(0x2C30, 0x2C5F)]),
    // Coptic.
    RareScript::words(&[(0x2C80, 0x2CE3)]),
    // Balinese.
    RareScript {
        letters: &[(0x1B05, 0x1B33)],
        marks: &[(0x1B35, 0x1B43)],
        separator: " ",
    },
    // Tai Tham.
    RareScript {
        letters: &[(0x1A20, 0x1A54)],
        marks: &[(0x1A61, 0x1A74)],
        separator: " ",
    },
    // Hangul Jamo: decomposed syllables.
    RareScript {
        letters: &[(0x1100, 0x1112)],
        marks: &[(0x1161, 0x1175), (0x11A8, 0x11C2)],
        separator: " ",
    },
    // Braille.
    RareScript {
        letters: &[(0x2801, 0x28FF)],
        marks: &[],
        separator: "\u{2800}",
    },
    // Kangxi radicals.
    RareScript {
        letters: &[(0x2F00, 0x2FD5)],
        marks: &[],
        separator: "",
    },
    // Limbu.
    RareScript {
        letters: &[(0x1900, 0x191E)],
        marks: &[(0x1920, 0x192B)],
        separator: " ",
    },
];

/// The four-byte scripts of `guard-rare-four` (the `rare_four` count): one token per byte in
/// every vocabulary but for a few CJK ideographs of Extension B.
const RARE_FOUR: [RareScript; 11] = [
    // Gothic.
    RareScript::words(&[(0x10330, 0x1034A)]),
    // Deseret.
    RareScript::words(&[(0x10400, 0x1044F)]),
    // Shavian.
    RareScript::words(&[(0x10450, 0x1047F)]),
    // Osage.
    RareScript::words(&[(0x104B0, 0x104D3), (0x104D8, 0x104FB)]),
    // Old Italic.
    RareScript::words(&[(0x10300, 0x1031F)]),
    // Mathematical alphanumerics: bold, sans-serif and monospace letters (`𝐇𝐞𝐥𝐥𝐨`).
    RareScript::words(&[(0x1D400, 0x1D433), (0x1D5A0, 0x1D5D3), (0x1D670, 0x1D6A3)]),
    // Adlam.
    RareScript {
        letters: &[(0x1E900, 0x1E943)],
        marks: &[(0x1E944, 0x1E94A)],
        separator: " ",
    },
    // CJK Unified Ideographs Extension B.
    RareScript {
        letters: &[(0x20000, 0x2A6DF)],
        marks: &[],
        separator: "",
    },
    // Cuneiform.
    RareScript::words(&[(0x12000, 0x12399)]),
    // Egyptian hieroglyphs.
    RareScript::words(&[(0x13000, 0x1342E)]),
    // Supplementary private use (the icons of Nerd Fonts' Material Design set).
    RareScript::words(&[(0xF0001, 0xF1AF0)]),
];

/// A character of `ranges` (inclusive code point ranges; a few code points in them are
/// unassigned, which a byte-level vocabulary splits into bytes all the same).
fn pick_char(g: &mut Rng, ranges: &[(u32, u32)]) -> char {
    let &(first, last) = g.pick(ranges);
    char::from_u32(first + g.range(0, (last - first + 1) as usize) as u32).unwrap_or(' ')
}

/// Four-byte emoji for [`gen_rare_script`]'s chat lines.
const EMOJI4: [&str; 12] = [
    "😀", "😂", "🎉", "🚀", "👍", "🔥", "🙏", "👏", "💯", "🤔", "😅", "🥳",
];

/// Lines of words in `script` (one of [`RARE_SCRIPTS`] or [`RARE_FOUR`]); in some documents a share of the words are
/// English words or numbers, as in a translated interface, and in some an emoji follows a few
/// words, as in chat (text in these scripts is the model's `other` kind, whose price for
/// four-byte characters no other document sets).
fn gen_rare_script(g: &mut Rng, script: &RareScript) -> String {
    let &RareScript {
        letters,
        marks,
        separator,
    } = script;
    let target = g.range(600, 3_000);
    let latin = [0.0, 0.0, 0.15, 0.3][g.range(0, 4)];
    let emoji = [0.0, 0.1][g.range(0, 2)];
    let mut s = String::new();
    while s.len() < target {
        for i in 0..g.range(3, 14) {
            if i > 0 {
                s.push_str(separator);
            }
            if g.chance(emoji) {
                s.push_str(g.pick::<&str>(&EMOJI4));
                s.push(' ');
            }
            if g.chance(latin) {
                if g.chance(0.3) {
                    s.push_str(&g.range(1, 10_000).to_string());
                } else {
                    s.push_str(g.pick::<&str>(WORDS));
                }
                continue;
            }
            for _ in 0..g.range(1, 5) {
                s.push(pick_char(g, letters));
                if !marks.is_empty() && g.chance(0.5) {
                    s.push(pick_char(g, marks));
                }
            }
        }
        s.push_str(if g.chance(0.5) { ".\n" } else { "\n" });
    }
    s
}

/// Common Chinese words (software messages' vocabulary) for [`gen_han_with_extension_a`].
const HAN_WORDS: [&str; 48] = [
    "文件",
    "目录",
    "设置",
    "错误",
    "用户",
    "系统",
    "打开",
    "保存",
    "关闭",
    "删除",
    "名称",
    "选择",
    "无法",
    "找到",
    "输入",
    "输出",
    "程序",
    "数据",
    "网络",
    "连接",
    "服务器",
    "密码",
    "帐户",
    "时间",
    "日期",
    "版本",
    "更新",
    "安装",
    "下载",
    "上传",
    "窗口",
    "显示",
    "隐藏",
    "帮助",
    "信息",
    "警告",
    "的",
    "是",
    "在",
    "了",
    "和",
    "不",
    "一个",
    "这个",
    "我们",
    "可以",
    "需要",
    "已经",
];

/// Chinese sentences of common words with names of one to three CJK Extension A ideographs
/// (U+3400–U+4DB5) among them: the rare characters of names and classical text, a token per
/// byte in every vocabulary, beside words the vocabularies hold whole.
fn gen_han_with_extension_a(g: &mut Rng) -> String {
    let target = g.range(600, 3_000);
    let share = [0.05, 0.15, 0.3][g.range(0, 3)];
    let mut s = String::new();
    while s.len() < target {
        for i in 0..g.range(4, 16) {
            if i > 0 && g.chance(0.2) {
                s.push(if g.chance(0.5) { '，' } else { '、' });
            }
            if g.chance(share) {
                for _ in 0..g.range(1, 4) {
                    s.push(pick_char(g, &[(0x3400, 0x4DB5)]));
                }
            } else {
                s.push_str(g.pick::<&str>(&HAN_WORDS));
            }
        }
        s.push_str("。\n");
    }
    s
}

/// Symbols of the `symbols` count, by kind.
const MATH_SYMBOLS: &str = "∀∃∈∉∋∑∏∫∂∇√∞≈≠≡≤≥⊂⊃⊆⊇∪∩∧∨⇒⇔→←↔↦⊕⊗⊥∥∠∴∵ℕℤℚℝℂ⁰⁴⁵⁶⁷⁸⁹ⁿ₀₁₂₃₄₅₆₇₈₉";
const STATUS_SYMBOLS: &str = "⌘⌥⏎⌫⌦⎋⏏▶▷◀◁●○◆◇■□▪▫▲△▼▽◉◎①②③④⑤⑥⑦⑧⑨⑩ⒶⒷⒸ℃№™℗℮";
const ARROW_SYMBOLS: &str = "←↑→↓↔↕⇐⇑⇒⇓⇔⟶⟵⟹⤴⤵↩↪↗↘↙↖⇄⇆↻↺";

/// Emoji sequences (joined by U+200D, with skin tones, variation selectors, flags of two
/// regional indicators): o200k spends two tokens or more on each of their four-byte characters,
/// where the single emoji of `guard-emoji` cost about one, and claude-legacy about one per byte;
/// their joiners and selectors make a text of them the model's `other` kind.
const EMOJI_SEQUENCES: [&str; 18] = [
    "👨‍👩‍👧‍👦",
    "👩‍👩‍👦",
    "🏳️‍🌈",
    "🏴‍☠️",
    "👩🏽‍💻",
    "🧑🏿‍🚀",
    "👍🏻",
    "🙋🏾‍♀️",
    "🇺🇸",
    "🇯🇵",
    "🇩🇪",
    "🇧🇷",
    "🇮🇳",
    "🧑‍🤝‍🧑",
    "❤️‍🔥",
    "😶‍🌫️",
    "🐻‍❄️",
    "👁️‍🗨️",
];

/// Chat lines with emoji sequences among the words.
fn gen_emoji_sequences(g: &mut Rng) -> String {
    let target = g.range(600, 3_000);
    let share = [0.2, 0.5][g.range(0, 2)];
    let mut s = String::new();
    while s.len() < target {
        for i in 0..g.range(2, 12) {
            if i > 0 {
                s.push(' ');
            }
            if g.chance(share) {
                s.push_str(g.pick::<&str>(&EMOJI_SEQUENCES));
            } else {
                s.push_str(g.pick::<&str>(WORDS));
            }
        }
        s.push('\n');
    }
    s
}

/// Lines that use symbols: formulas (identifiers, digits and operators), status lines (a symbol
/// before a few words), or runs of symbols alone.
fn gen_symbols(g: &mut Rng) -> String {
    let style = g.range(0, 3);
    let target = g.range(600, 3_000);
    let kinds: [Vec<char>; 3] =
        [MATH_SYMBOLS, STATUS_SYMBOLS, ARROW_SYMBOLS].map(|symbols| symbols.chars().collect());
    let mut s = String::new();
    while s.len() < target {
        match style {
            0 => {
                for i in 0..g.range(3, 10) {
                    if i > 0 {
                        s.push(' ');
                    }
                    if g.chance(0.5) {
                        s.push(char::from(b'a' + g.range(0, 26) as u8));
                        if g.chance(0.3) {
                            s.push_str(&g.range(0, 100).to_string());
                        }
                    } else {
                        s.push(*g.pick(&kinds[0]));
                    }
                }
            }
            1 => {
                s.push(*g.pick(&kinds[1]));
                for _ in 0..g.range(1, 6) {
                    s.push(' ');
                    s.push_str(g.pick::<&str>(WORDS));
                }
                if g.chance(0.4) {
                    s.push(' ');
                    s.push(*g.pick(&kinds[2]));
                    s.push(' ');
                    s.push_str(g.pick::<&str>(WORDS));
                }
            }
            _ => {
                for _ in 0..g.range(4, 24) {
                    let kind = &kinds[g.range(0, 3)];
                    s.push(*g.pick(kind));
                    if g.chance(0.3) {
                        s.push(' ');
                    }
                }
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A fresh directory of text files (`name`, lines of `word`), removed when dropped.
    struct Files(PathBuf);

    impl Files {
        fn new(test: &str, files: &[(&str, &str)]) -> Files {
            let dir =
                std::env::temp_dir().join(format!("fit-corpus-{test}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            // About 30 KB a file: enough for three documents of at most 6,000 bytes however
            // the file is cut, and the cut is drawn from the file's path, which holds the
            // process id (with 400 lines, some ids cut a file into a single document).
            for (name, word) in files {
                let text: String = (0..2000).map(|i| format!("{word} line {i}\n")).collect();
                fs::write(dir.join(name), text).unwrap();
            }
            Files(dir)
        }

        fn path(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn texts_of(docs: &[Doc], source: &Path) -> Vec<String> {
        let source = source.display().to_string();
        docs.iter()
            .filter(|d| d.source == source)
            .map(|d| d.text.clone())
            .collect()
    }

    #[test]
    fn a_files_documents_do_not_depend_on_the_other_files() {
        let files = Files::new(
            "independent",
            &[("a.txt", "alpha"), ("b.txt", "beta"), ("c.txt", "gamma")],
        );
        let read = |names: &[&str]| {
            let paths = names.iter().map(|n| files.path(n)).collect();
            docs_from_files("prose", paths, &|s| s, &Selection::fresh(7), 100, 3)
        };
        let all = read(&["a.txt", "b.txt", "c.txt"]);
        let alone = read(&["a.txt"]);
        let a = texts_of(&alone, &files.path("a.txt"));
        assert!(a.len() >= 2, "{}", a.len());
        assert_eq!(texts_of(&all, &files.path("a.txt")), a);
        // The seed still decides how a file is cut.
        let reseeded = docs_from_files(
            "prose",
            vec![files.path("a.txt")],
            &|s| s,
            &Selection::fresh(8),
            100,
            3,
        );
        assert_ne!(texts_of(&reseeded, &files.path("a.txt")), a);
    }

    #[test]
    fn a_listed_selection_reads_its_files_and_names_the_missing_ones() {
        let files = Files::new("listed", &[("a.txt", "alpha"), ("b.txt", "beta")]);
        let listed = BTreeMap::from([(
            "prose".to_owned(),
            BTreeSet::from([
                stable_path(&files.path("a.txt")),
                stable_path(&files.path("gone.txt")),
            ]),
        )]);
        let selection = Selection::listed(7, listed);
        let paths = vec![files.path("a.txt"), files.path("b.txt")];
        let docs = docs_from_files("prose", paths.clone(), &|s| s, &selection, 100, 3);
        let fresh = docs_from_files("prose", paths, &|s| s, &Selection::fresh(7), 100, 3);
        assert!(!docs.is_empty());
        assert!(docs.iter().all(|d| d.source.ends_with("a.txt")));
        assert_eq!(
            texts_of(&docs, &files.path("a.txt")),
            texts_of(&fresh, &files.path("a.txt"))
        );
        assert_eq!(
            selection.missing(),
            [format!("prose: {}", stable_path(&files.path("gone.txt")))]
        );
        // A category the manifest does not list reads nothing.
        assert!(
            docs_from_files(
                "rust",
                vec![files.path("b.txt")],
                &|s| s,
                &selection,
                100,
                3
            )
            .is_empty()
        );
    }

    #[test]
    fn the_locked_registry_packages_are_read_from_cargo_lock() {
        let lock = r#"version = 4

[[package]]
name = "ferroloop"
version = "0.1.0"
dependencies = [
 "memchr",
]

[[package]]
name = "memchr"
version = "2.7.4"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "78ca9ab1a0babb1e7d5695e3530886289c18cf2f87ec19a575a0abdce112e3a3"

[[package]]
name = "from-git"
version = "1.0.0"
source = "git+https://example.com/from-git#0123"
"#;
        assert_eq!(
            locked_packages(lock),
            BTreeSet::from(["memchr-2.7.4".to_owned()])
        );
    }

    #[test]
    fn stable_paths_drop_the_machine_part() {
        assert_eq!(
            stable_path(Path::new(
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/memchr-2.7.4/README.md"
            )),
            "memchr-2.7.4/README.md"
        );
        assert_eq!(
            stable_path(Path::new("/usr/share/man/de/man1/ls.1.gz")),
            "man/de/man1/ls.1.gz"
        );
        assert_eq!(
            stable_path(Path::new("/opt/python/lib/python3.11/json/decoder.py")),
            "json/decoder.py"
        );
    }

    #[test]
    fn fingerprints_tell_documents_apart() {
        let of = |texts: &[&str]| {
            let mut fingerprint = Fingerprint::default();
            for text in texts {
                fingerprint.add(text);
            }
            fingerprint.hex()
        };
        assert_eq!(of(&["ab", "c"]), of(&["ab", "c"]));
        assert_ne!(of(&["ab", "c"]), of(&["a", "bc"]));
        assert_ne!(of(&["ab", "c"]), of(&["ab", "d"]));
        assert_eq!(of(&[]).len(), 16);
        // The hash of the whole is the hash of the parts in turn.
        assert_eq!(of(&["ab"]), format!("{:016x}", fnv1a(b"ab\0")));
    }

    /// Checks the documents a second step generates (`generate` with a fixed seed): half of them
    /// train, all are of `category`, each has at least `least` characters of the script count
    /// `name`, and the same seed gives the same documents. Returns that count's index.
    fn check_second_step_docs(
        generate: fn(&Selection, &'static str) -> Vec<(Doc, bool)>,
        category: &'static str,
        name: &str,
        least: u64,
    ) -> usize {
        use ferroloop::tokens::{SCRIPT_NAMES, count_classes};
        let script = SCRIPT_NAMES.iter().position(|&n| n == name).unwrap();
        let docs = generate(&Selection::fresh(7), category);
        assert_eq!(
            docs.iter().filter(|(_, train)| *train).count(),
            docs.len() / 2
        );
        for (doc, _) in &docs {
            assert_eq!(doc.category, category);
            let count = count_classes(doc.text.as_bytes()).scripts[script];
            assert!(count >= least, "{}", doc.text);
        }
        let again = generate(&Selection::fresh(7), category);
        assert!(docs.iter().zip(&again).all(|(a, b)| a.0.text == b.0.text));
        script
    }

    #[test]
    fn phonetic_documents_hold_phonetic_letters_and_split_in_halves() {
        use crate::phonetic::{CATEGORY, NAME};
        use ferroloop::tokens::count_classes;
        let phonetic = check_second_step_docs(phonetic_docs, CATEGORY, NAME, 20);
        // Every transcription has a letter of the count (or `θ ŋ æ`, which are Greek, Latin
        // Extended-A and Latin-1), and the narrow inventories have some.
        for (word, ipa) in TRANSCRIBED {
            let letters = count_classes(ipa.as_bytes()).scripts[phonetic];
            assert!(
                letters > 0 || ipa.chars().any(|c| "θŋæ".contains(c)),
                "{word}"
            );
        }
        let narrow: String = IPA_CONSONANTS.concat() + &IPA_VOWELS.concat();
        assert_eq!(count_classes(narrow.as_bytes()).scripts[phonetic], 10 + 9);
    }

    #[test]
    fn misc_symbol_documents_hold_the_symbols_and_split_in_halves() {
        use crate::symbols::{CATEGORY, NAME};
        use ferroloop::tokens::count_classes;
        let misc = check_second_step_docs(misc_symbol_docs, CATEGORY, NAME, 10);
        // Every symbol of the list is of the count.
        let all = count_classes(MISC_SYMBOLS.as_bytes()).scripts[misc];
        assert_eq!(all, MISC_SYMBOLS.chars().count() as u64);
    }
}
