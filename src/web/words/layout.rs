//! The words of the page frame (the conflict page): key, zh-CN, en.

use super::Word;

/// The words of the pages every section shares (the conflict page).
pub const WORDS: &[Word] = &[
    ("error.conflict", "409 · 与现有数据冲突", "409 · Conflict"),
    (
        "error.conflict_hint",
        "请返回或刷新页面，查看最新状态。",
        "Go back or reload the page to see how things stand now.",
    ),
];
