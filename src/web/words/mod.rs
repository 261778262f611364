//! The words the pages print, one table per section (key, zh-CN, en), apart from the pages that print them: the
//! pages look words up through `i18n`, which reads these tables, so no page is both above and below `i18n`.

pub mod adjustments;
pub mod admin;
pub mod budgets;
pub mod field_errors;
pub mod layout;
pub mod manual;
pub mod nodes;
pub mod rates;
pub mod reports;
pub mod tco;

/// A word a page prints: key, zh-CN, en.
pub type Word = (&'static str, &'static str, &'static str);
