//! The words of the form errors: key, zh-CN, en.

use super::Word;

pub const WORDS: &[Word] = &[
    ("fieldmsg.required", "必填", "Required"),
    (
        "fieldmsg.characters",
        "含有不允许的字符（如 NUL、控制字符）",
        "Contains characters that are not allowed (NUL, control)",
    ),
    ("fieldmsg.too_long", "太长", "Too long"),
    ("fieldmsg.not_number", "不是数字，请输入如 1234.56 的数值", "Not a number: type one such as 1234.56"),
    ("fieldmsg.negative", "不能为负数", "Must not be negative"),
    ("fieldmsg.out_of_range", "超出允许范围", "Out of range"),
    ("fieldmsg.not_date", "不是日期，请按 YYYY-MM-DD 输入", "Not a date: use YYYY-MM-DD"),
    (
        "fieldmsg.date_range",
        "日期须在 2000-01-01 至 2100-12-31 之间",
        "The date must be between 2000-01-01 and 2100-12-31",
    ),
    ("fieldmsg.not_month", "不是月份，请按 YYYY-MM 输入", "Not a month: use YYYY-MM"),
    ("fieldmsg.unknown_team", "没有这个团队", "No such team"),
    ("fieldmsg.taken", "已存在", "Already taken"),
    (
        "fieldmsg.form_invalid",
        "表单有误，未保存任何内容，请修改标出的字段。",
        "Nothing was saved: correct the marked fields.",
    ),
];
