//! The bad fields of a portal form: each field typed as text is read by the shared rules ([`crate::validate`]),
//! and a refusal becomes the field's message in the page's language — what is wrong in words, with the rule's
//! own detail (the API's message) in English; and the one translation of the use cases' English messages.

use std::sync::LazyLock;

use rust_decimal::Decimal;

use super::i18n::{Lang, t};
use crate::billing::{Month, MonthParseError};
use crate::usecase;
pub use crate::validate::Problem;
use crate::validate::{self, FieldError};

/// The longest text a figure field takes (a decimal the API reads has at most 26 characters).
pub const FIGURE_MAX: usize = 32;

/// The page's words for what is wrong with a field.
fn key(problem: Problem) -> &'static str {
    match problem {
        Problem::Required => "fieldmsg.required",
        Problem::Characters => "fieldmsg.characters",
        Problem::TooLong => "fieldmsg.too_long",
        Problem::NotNumber => "fieldmsg.not_number",
        Problem::Negative => "fieldmsg.negative",
        Problem::OutOfRange => "fieldmsg.out_of_range",
        Problem::NotDate => "fieldmsg.not_date",
        Problem::DateRange => "fieldmsg.date_range",
        Problem::NotMonth => "fieldmsg.not_month",
        Problem::UnknownTeam => "fieldmsg.unknown_team",
        Problem::Taken => "fieldmsg.taken",
    }
}

/// The validation messages of the use cases (English) as a zh-CN reader reads them; the English one for en, and
/// for a message this table does not know (it is shown rather than hidden).
pub fn localize(lang: Lang, message: &str) -> String {
    static ZH: LazyLock<Vec<(regex::Regex, &'static str)>> = LazyLock::new(|| {
        [
            (r"^must not be blank$", "不能为空"),
            (r"^required$", "必填"),
            (r"^must be at most (\d+) characters$", "最多 $1 个字符"),
            (r"^must be at least (\d+) characters$", "至少 $1 个字符"),
            (r"^must not contain a NUL byte$", "不能包含 NUL 字符"),
            (r"^must not contain (a control|a bidirectional|control)", "不能包含控制字符或不可见字符"),
            (r"^a team id uses", "团队 ID 只能使用 a-z、0-9、`.`、`_`、`-`（最多 63 个，以字母或数字开头）"),
            (r"^`(.*)` is not a team id", "`$1` 不是团队 ID（只能使用 a-z、0-9、`.`、`_`、`-`）"),
            (r"^unknown team `([^`]*)`", "团队 `$1` 不存在（请先创建）"),
            (r"^`(.*)` is not a date", "`$1` 不是日期（2026-11-01、2026/11/01 或 20261101）"),
            (r"^must be between (\S+) and (\S+)$", "必须在 $1 与 $2 之间"),
            // a report's range of days (the unit cost's) and its grouping
            (r"^must be before `to`$", "必须早于截止日期"),
            (r"^at most (\d+) days after `from`$", "最多比起始日期晚 $1 天"),
            (r"^`(.*)`: use team, namespace, model, engine, day or month$", "`$1` 不是可选的分组方式"),
            (r"^must be a Kubernetes namespace name", "必须是 Kubernetes 命名空间名（不含空格）"),
            (r"^use A-Z, a-z, 0-9", "只能使用 A-Z、a-z、0-9、`.`、`_`、`-`（最多 63 个）"),
            (
                r"^use a-z, 0-9, `.`, `_`, `@`, `-`",
                "只能使用 a-z、0-9、`.`、`_`、`@`、`-`（最多 64 个，以字母或数字开头）",
            ),
            (r"^team `([^`]*)` exists$", "团队 `$1` 已存在"),
            (r"^user `([^`]*)` exists$", "用户 `$1` 已存在"),
            (r"^no user `([^`]*)`$", "用户 `$1` 不存在"),
            (r"^a team_lead needs at least one team$", "团队负责人至少需要一个团队"),
            (r"^only a team_lead has teams", "只有团队负责人才有团队"),
            (r"^a team_lead token needs", "团队负责人的令牌至少需要一个团队，其他角色的令牌不能有团队"),
            (r"is not in the future$", "必须晚于现在"),
            (r"^not a role", "不是角色（admin、finance、viewer、team_lead）"),
            (r"^choose a file", "请选择一个 CSV 文件"),
            (r"^the mappings changed since the preview", "预览之后映射已有变化：没有导入任何内容；请重新上传文件"),
            (r"^the previewed file was altered", "预览的文件被改动过：没有导入任何内容；请重新上传文件"),
            (r"^you cannot disable yourself", "不能停用自己的账号"),
            (r"already has a mapping valid from", "该命名空间在这一天已有映射"),
            (r"^queue (\S+) is already mapped from (\S+)$", "队列 $1 自 $2 起已有归属"),
            (r"^must be a queue name", "必须是队列名（不含空格）"),
            (r"^no rows", "没有数据行（需要表头和至少一行）"),
            (r"^the file is neither UTF-8 nor GBK", "文件既不是 UTF-8 也不是 GBK/GB18030：请另存为 CSV UTF-8"),
            (r"^at most (\d+) rows per import", "每次最多导入 $1 行；请拆分文件"),
            (r"^maps (\S+) from (\S+) to (\S+), row (\d+) to (\S+)$", "将 $1 自 $2 映射到 $3，而第 $4 行映射到 $5"),
            (
                r"^gives team (\S+) other finance codes from (\S+) than row (\d+)$",
                "团队 $1 自 $2 起的财务编码与第 $3 行不同",
            ),
            // the conflicts a page shows (the API answers them 409)
            (r"^(?:month )?(\d{4}-\d{2}) is closed already$", "$1 已结账"),
            (r"^month (\d{4}-\d{2}) has not ended yet$", "$1 尚未结束，不能结账"),
            (r"^month (\d{4}-\d{2}) is not ready to close", "$1 尚不具备结账条件（阻碍项见结账页）"),
            (r"^month (\d{4}-\d{2}) is closed under ", "$1 已结账：账单按结账时选定的计费政策冻结，不能按其他政策查看"),
            (r"^it exists already", "已存在（已被他人先行或同时写入）"),
        ]
        .into_iter()
        .filter_map(|(re, zh)| regex::Regex::new(re).ok().map(|r| (r, zh)))
        .collect()
    });
    if lang == Lang::En {
        return message.to_string();
    }
    ZH.iter()
        .find_map(|(re, zh)| {
            re.captures(message).map(|c| {
                let mut out = String::new();
                c.expand(zh, &mut out);
                out
            })
        })
        .unwrap_or_else(|| message.to_string())
}

/// Every bad field of a form, in the order found.
#[derive(Debug, Clone, Default)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    pub fn add(&mut self, field: &str, problem: Problem, detail: impl Into<String>) {
        self.0.push(FieldError::of(field, problem, detail));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The message next to `field` in `lang` (the first refusal of that field).
    pub fn message(&self, lang: Lang, field: &str) -> Option<String> {
        let e = self.0.iter().find(|e| e.field == field)?;
        let words = t(lang, key(e.problem));
        Some(match lang {
            Lang::En if !e.message.is_empty() => format!("{words}: {}", e.message),
            // a use case's own rule, where the translation knows it, says more than the word alone
            Lang::Zh if matches!(e.problem, Problem::OutOfRange | Problem::Taken) => {
                let zh = localize(lang, &e.message);
                if zh != e.message { format!("{words}：{zh}") } else { words.to_string() }
            }
            _ => words.to_string(),
        })
    }

    /// The use case's refusal as fields, when it is one a form shows (bad values, an unknown team, a date taken);
    /// `Err` gives back any other error. `prefix` is stripped from the use case's field names (`tco.`).
    pub fn from_usecase(e: usecase::Error, prefix: &str) -> Result<FieldErrors, usecase::Error> {
        let mut out = FieldErrors::default();
        match e {
            usecase::Error::Invalid(list) => {
                for FieldError { field, message, problem } in list {
                    let field = field.strip_prefix(prefix).unwrap_or(&field).to_string();
                    out.add(&field, problem, message);
                }
            }
            usecase::Error::NotFound(what) if what.starts_with("team ") => {
                out.add("team", Problem::UnknownTeam, format!("{what} not found"))
            }
            usecase::Error::Conflict { field: Some(field), message } => out.add(&field, Problem::Taken, message),
            other => return Err(other),
        }
        Ok(out)
    }
}

/// A text field as the rules take text (`validate::text`): the trimmed text, or the field's problem.
pub fn text(errors: &mut FieldErrors, field: &str, s: &str, max: usize) -> Option<String> {
    if s.trim().is_empty() && !s.contains(|c: char| c.is_control()) {
        errors.add(field, Problem::Required, "");
        return None;
    }
    match validate::text(field, s, max) {
        Ok(t) => Some(t),
        Err(e) => {
            // `validate::text` names forbidden characters before the length
            let problem =
                if e.message.starts_with("must not contain") { Problem::Characters } else { Problem::TooLong };
            errors.add(field, problem, e.message);
            None
        }
    }
}

/// A figure field: a decimal as the API reads one (not negative, no exponent); its range is the use case's.
pub fn figure(errors: &mut FieldErrors, field: &str, s: &str) -> Option<Decimal> {
    let s = text(errors, field, s, FIGURE_MAX)?;
    match validate::decimal::parse(field, &s) {
        Ok(d) => Some(d),
        Err(e) => {
            let negative = s.strip_prefix('-').is_some_and(|rest| validate::decimal::parse(field, rest.trim()).is_ok());
            errors.add(field, if negative { Problem::Negative } else { Problem::NotNumber }, e.message);
            None
        }
    }
}

/// An optional figure field: blank is `None`.
pub fn optional_figure(errors: &mut FieldErrors, field: &str, s: &str) -> Option<Option<Decimal>> {
    if s.trim().is_empty() && !s.contains(|c: char| c.is_control()) {
        return Some(None);
    }
    figure(errors, field, s).map(Some)
}

/// A date field `YYYY-MM-DD` within the dates the rules accept.
pub fn date(errors: &mut FieldErrors, field: &str, s: &str) -> Option<chrono::NaiveDate> {
    let s = text(errors, field, s, FIGURE_MAX)?;
    validate::parse_date(field, &s)
        .map_err(|e| {
            let shaped = chrono::NaiveDate::parse_from_str(&s, "%Y-%m-%d").is_ok();
            errors.add(field, if shaped { Problem::DateRange } else { Problem::NotDate }, e.message);
        })
        .ok()
}

/// A month field `YYYY-MM` within the months the rules accept.
pub fn month(errors: &mut FieldErrors, field: &str, s: &str) -> Option<Month> {
    let s = text(errors, field, s, FIGURE_MAX)?;
    Month::parse(&s)
        .map_err(|e| {
            let shaped = matches!(e, MonthParseError::OutOfRange(_));
            errors.add(field, if shaped { Problem::DateRange } else { Problem::NotMonth }, e.to_string());
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(f: impl FnOnce(&mut FieldErrors)) -> Vec<Problem> {
        let mut e = FieldErrors::default();
        f(&mut e);
        e.0.into_iter().map(|e| e.problem).collect()
    }

    #[test]
    fn figures_are_read_as_the_api_reads_them() {
        let mut e = FieldErrors::default();
        assert_eq!(figure(&mut e, "amount", " 1234.56 "), Some(Decimal::new(123456, 2)));
        assert!(e.is_empty());
        assert_eq!(problems(|e| assert!(figure(e, "a", "").is_none())), [Problem::Required]);
        assert_eq!(problems(|e| assert!(figure(e, "a", "abc").is_none())), [Problem::NotNumber]);
        assert_eq!(problems(|e| assert!(figure(e, "a", "1e3").is_none())), [Problem::NotNumber]);
        assert_eq!(problems(|e| assert!(figure(e, "a", "-5").is_none())), [Problem::Negative]);
        assert_eq!(problems(|e| assert!(figure(e, "a", "1\0").is_none())), [Problem::Characters]);
        assert_eq!(problems(|e| assert!(figure(e, "a", &"9".repeat(40)).is_none())), [Problem::TooLong]);
        assert_eq!(optional_figure(&mut FieldErrors::default(), "a", "  "), Some(None));
    }

    #[test]
    fn dates_and_months_tell_shape_from_range() {
        assert_eq!(problems(|e| assert!(date(e, "d", "2026-13-01").is_none())), [Problem::NotDate]);
        assert_eq!(problems(|e| assert!(date(e, "d", "1999-12-31").is_none())), [Problem::DateRange]);
        assert_eq!(problems(|e| assert!(month(e, "m", "1999-12").is_none())), [Problem::DateRange]);
        assert_eq!(problems(|e| assert!(month(e, "m", "2026-1").is_none())), [Problem::NotMonth]);
        assert!(month(&mut FieldErrors::default(), "m", "2026-11").is_some());
    }

    #[test]
    fn a_message_speaks_the_page_language() {
        let mut e = FieldErrors::default();
        figure(&mut e, "amount", "abc");
        assert_eq!(e.message(Lang::Zh, "amount").unwrap(), "不是数字，请输入如 1234.56 的数值");
        assert!(e.message(Lang::En, "amount").unwrap().starts_with("Not a number: type one such as 1234.56: `abc`"));
        assert_eq!(e.message(Lang::En, "other"), None);
    }
}
