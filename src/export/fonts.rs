//! The fonts a PDF is set in: Noto Sans CJK first, then fallbacks for what it lacks (DejaVu Sans for symbols,
//! Symbola for emoji), then a visible replacement glyph — so a character no installed font has (an emoji in a team
//! name) prints as "�" instead of failing the whole month's export.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use krilla::text::{GlyphId, KrillaGlyph};
use skrifa::{FontRef, MetadataProvider};

use super::PdfError;

/// Where Debian's `fonts-noto-cjk` (and a few other distributions) put Noto Sans CJK.
pub const CJK_FONT_PATHS: [&str; 6] = [
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJKsc-Regular.otf",
    "/usr/share/fonts/truetype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto/NotoSansCJK-Regular.ttc",
];

/// Fallbacks, in order, where Debian puts them: `fonts-dejavu-core` (symbols, arrows, box drawing, U+FFFD) and
/// `fonts-symbola` (emoji as outlines, which a PDF embeds small; the colour bitmap emoji fonts are megabytes).
pub const FALLBACK_FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf",
    "/usr/share/fonts/truetype/Symbola.ttf",
];

/// The environment variable naming the primary font file instead of the standard paths.
pub const FONT_ENV: &str = "CARDHOUR_PDF_FONT";

/// One face of a font file, with the bytes it lives in.
#[derive(Debug)]
pub struct Face {
    pub(super) data: Arc<Vec<u8>>,
    pub(super) index: u32,
    pub(super) family: String,
    path: Option<PathBuf>,
}

/// The primary face and its fallbacks, tried in order for every character.
#[derive(Debug)]
pub struct FontChain {
    pub(super) faces: Vec<Face>,
}

/// Whether this machine can set PDF statements: the fonts it uses, or why it cannot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct PdfFonts {
    pub available: bool,
    /// The fonts, primary first, with their files.
    pub fonts: Option<String>,
    /// Why PDFs cannot be made (no CJK font found, and where it was looked for; what to install).
    pub problem: Option<String>,
}

/// Why no PDF can be set on this machine.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct FontsMissing(pub String);

impl FontChain {
    /// A chain from font files' bytes: `primary` first (its Simplified Chinese face when it is a collection),
    /// then each fallback that parses (one that does not is skipped with a warning: it only ever adds glyphs).
    pub fn from_bytes(primary: Vec<u8>, fallbacks: Vec<Vec<u8>>) -> Result<FontChain, PdfError> {
        let mut faces = vec![Face::new(primary, None)?];
        for f in fallbacks {
            match Face::new(f, None) {
                Ok(face) => faces.push(face),
                Err(e) => tracing::warn!(error = %e, "a fallback font cannot be read; skipped"),
            }
        }
        let chain = FontChain { faces };
        // every text needs a replacement glyph at least
        chain.metrics()?;
        Ok(chain)
    }

    /// The fonts installed on this machine: the primary from `CARDHOUR_PDF_FONT` or the standard Noto Sans CJK
    /// paths, then every fallback found. Loaded once found and kept for the process; while none is found every call
    /// looks again, so a font installed after `serve` started is used by the next PDF (issue 33: a fresh install
    /// answered 500 until a restart). Concurrent first calls load it once.
    pub fn installed() -> Result<Arc<FontChain>, FontsMissing> {
        static CHAIN: Mutex<Option<Arc<FontChain>>> = Mutex::new(None);
        // a panic while loading leaves nothing half-set: the slot is written only with a loaded chain
        let mut slot = CHAIN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(chain) = slot.as_ref() {
            return Ok(Arc::clone(chain));
        }
        let chain = Arc::new(Self::load_installed()?);
        *slot = Some(Arc::clone(&chain));
        Ok(chain)
    }

    /// Whether PDF statements can be made on this machine now, and with what, or why not (the health figure).
    pub fn status() -> PdfFonts {
        match Self::installed() {
            Ok(chain) => PdfFonts { available: true, fonts: Some(chain.describe()), problem: None },
            Err(e) => PdfFonts { available: false, fonts: None, problem: Some(e.0) },
        }
    }

    fn load_installed() -> Result<FontChain, FontsMissing> {
        let primary: Vec<PathBuf> = match std::env::var_os(FONT_ENV) {
            Some(p) => vec![PathBuf::from(p)],
            None => CJK_FONT_PATHS.iter().map(PathBuf::from).collect(),
        };
        let (path, bytes) =
            primary.iter().find_map(|p| std::fs::read(p).ok().map(|b| (p.clone(), b))).ok_or_else(|| {
                FontsMissing(format!(
                    "no CJK font for PDF statements: install Noto Sans CJK (Debian: fonts-noto-cjk) or set {FONT_ENV} \
                 (looked in {})",
                    primary.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                ))
            })?;
        let mut faces =
            vec![Face::new(bytes, Some(path.clone())).map_err(|e| FontsMissing(format!("{}: {e}", path.display())))?];
        let mut seen_families = vec![faces[0].family.clone()];
        for p in FALLBACK_FONT_PATHS.iter().map(Path::new) {
            let Ok(bytes) = std::fs::read(p) else { continue };
            match Face::new(bytes, Some(p.to_path_buf())) {
                Ok(face) if !seen_families.contains(&face.family) => {
                    seen_families.push(face.family.clone());
                    faces.push(face);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(path = %p.display(), error = %e, "a fallback font cannot be read; skipped"),
            }
        }
        let chain = FontChain { faces };
        chain.metrics().map_err(|e| FontsMissing(e.to_string()))?;
        Ok(chain)
    }

    /// What the chain is made of, for the start-up log: "Noto Sans CJK SC (/usr/…), DejaVu Sans (…)".
    pub fn describe(&self) -> String {
        self.faces
            .iter()
            .map(|f| match &f.path {
                Some(p) => format!("{} ({})", f.family, p.display()),
                None => f.family.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The primary face's family name (the chart's sans-serif).
    pub fn family(&self) -> &str {
        &self.faces[0].family
    }

    pub(super) fn metrics(&self) -> Result<ChainMetrics<'_>, PdfError> {
        let faces = self
            .faces
            .iter()
            .map(|f| FontRef::from_index(f.data.as_slice(), f.index).map(FaceMetrics::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PdfError::Font(e.to_string()))?;
        let replacement = ['\u{FFFD}', '?']
            .into_iter()
            .find_map(|c| faces.iter().enumerate().find_map(|(i, f)| f.charmap.map(c).map(|g| (i, g, c))))
            .ok_or_else(|| PdfError::Font("no font of the chain has a replacement glyph (U+FFFD or ?)".into()))?;
        Ok(ChainMetrics { faces, replacement })
    }
}

impl Face {
    fn new(bytes: Vec<u8>, path: Option<PathBuf>) -> Result<Face, PdfError> {
        let (index, family) = pick_face(&bytes)?;
        Ok(Face { data: Arc::new(bytes), index, family, path })
    }
}

/// The face to use from a font file: in a collection, the Simplified Chinese one when there is one.
fn pick_face(font: &[u8]) -> Result<(u32, String), PdfError> {
    let file = skrifa::raw::FileRef::new(font).map_err(|e| PdfError::Font(e.to_string()))?;
    let faces: Vec<FontRef> = file.fonts().filter_map(Result::ok).collect();
    if faces.is_empty() {
        return Err(PdfError::Font("no font face in the file".into()));
    }
    let family = |f: &FontRef| {
        f.localized_strings(skrifa::string::StringId::FAMILY_NAME)
            .english_or_first()
            .map(|s| s.to_string())
            .unwrap_or_default()
    };
    let index = faces.iter().position(|f| family(f).ends_with(" SC")).unwrap_or(0);
    Ok((index as u32, family(&faces[index])))
}

pub(super) struct FaceMetrics<'a> {
    charmap: skrifa::charmap::Charmap<'a>,
    glyphs: skrifa::metrics::GlyphMetrics<'a>,
    upem: f32,
}

impl<'a> FaceMetrics<'a> {
    fn new(font: FontRef<'a>) -> Self {
        let (size, loc) = (skrifa::instance::Size::unscaled(), skrifa::instance::LocationRef::default());
        FaceMetrics {
            charmap: font.charmap(),
            glyphs: font.glyph_metrics(size, loc),
            upem: f32::from(font.metrics(size, loc).units_per_em),
        }
    }

    /// The advance of `glyph` in ems.
    fn advance(&self, glyph: skrifa::GlyphId) -> f32 {
        self.glyphs.advance_width(glyph).unwrap_or(0.0) / self.upem
    }
}

/// A stretch of text set in one face of the chain.
pub(super) struct Run {
    pub face: usize,
    pub text: String,
    pub glyphs: Vec<KrillaGlyph>,
    /// Advance of the run in ems.
    pub advance: f32,
}

/// Text measurement and glyph lookup over the chain (no shaping: statements hold CJK and Latin text, which needs
/// none, and shaping every cell with rustybuzz dominated the rendering time).
pub(super) struct ChainMetrics<'a> {
    faces: Vec<FaceMetrics<'a>>,
    /// The face, glyph and character drawn for a character no face has.
    replacement: (usize, skrifa::GlyphId, char),
}

/// Characters that draw nothing (joiners, variation selectors, bidi marks, tags): when no face maps them they are
/// left out rather than replaced, so "👍🏽" or a ZWJ sequence does not print a row of replacement marks.
fn is_default_ignorable(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
        | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}'
        | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

impl ChainMetrics<'_> {
    /// The face, glyph and character that draw `c` (a space for a control character, the replacement for one no
    /// face has: the text a PDF reader extracts is what is seen), or `None` for an ignorable one no face has.
    fn resolve(&self, c: char) -> Option<(usize, skrifa::GlyphId, char)> {
        // control characters (a tab or newline in a name imported from a CMDB) print as a space
        let c = if c.is_control() { ' ' } else { c };
        if let Some((f, g)) = self.faces.iter().enumerate().find_map(|(i, f)| f.charmap.map(c).map(|g| (i, g))) {
            return Some((f, g, c));
        }
        let (f, g, r) = self.replacement;
        (!is_default_ignorable(c)).then_some((f, g, r))
    }

    /// The width of `text` at `size` points.
    pub fn width(&self, text: &str, size: f32) -> f32 {
        text.chars().filter_map(|c| self.resolve(c)).map(|(f, g, _)| self.faces[f].advance(g)).sum::<f32>() * size
    }

    /// `text` split into runs of one face each, with their glyphs.
    pub fn runs(&self, text: &str) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for c in text.chars() {
            let Some((face, gid, drawn)) = self.resolve(c) else { continue };
            if runs.last().is_none_or(|r| r.face != face) {
                runs.push(Run { face, text: String::new(), glyphs: Vec::new(), advance: 0.0 });
            }
            let run = runs.last_mut().expect("just pushed");
            let start = run.text.len();
            run.text.push(drawn);
            let advance = self.faces[face].advance(gid);
            run.advance += advance;
            run.glyphs.push(KrillaGlyph::new(
                GlyphId::new(gid.to_u32()),
                advance,
                0.0,
                0.0,
                0.0,
                start..run.text.len(),
                None,
            ));
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> Option<Arc<FontChain>> {
        // the test machines install fonts-noto-cjk, fonts-dejavu-core and fonts-symbola (scripts/test.sh)
        FontChain::installed().ok()
    }

    #[test]
    fn every_character_gets_a_glyph_or_the_replacement() {
        let Some(chain) = chain() else {
            panic!("no CJK font: scripts/test.sh installs fonts-noto-cjk");
        };
        let m = chain.metrics().unwrap();
        // CJK from the primary face
        let runs = m.runs("视觉组 A100");
        assert_eq!(runs.len(), 1, "one face sets CJK and Latin");
        assert_eq!(runs[0].face, 0);
        assert_eq!(runs[0].glyphs.len(), "视觉组 A100".chars().count());
        // an emoji comes from a fallback (Symbola) when installed, else the replacement; never an error
        let runs = m.runs("ml🚀");
        assert!(runs.iter().any(|r| r.text.contains('🚀') && !r.glyphs.is_empty()), "the emoji is drawn by some face");
        assert!(m.width("ml🚀", 10.0) > m.width("ml", 10.0));
        // a private-use character no font has is the visible replacement (also in the extracted text); a lone
        // joiner draws nothing visible
        let runs = m.runs("a\u{10FFFD}");
        assert_eq!(runs.iter().map(|r| r.glyphs.len()).sum::<usize>(), 2);
        assert!(m.runs("\u{200D}").iter().all(|r| !r.text.contains('\u{FFFD}')), "a joiner is no replacement mark");
        assert_eq!(m.runs("a\u{10FFFD}").iter().map(|r| r.text.as_str()).collect::<String>(), "a\u{FFFD}");
    }
}
