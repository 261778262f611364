//! The words of the budgets page: key, zh-CN, en.

use super::Word;

pub const WORDS: &[Word] = &[
    ("nav.budgets", "预算", "Budgets"),
    ("budgets.title", "团队预算", "Team budgets"),
    ("budgets.forecast", "全月预测", "Forecast for the month"),
    ("budgets.used", "已用比例", "Used"),
    ("budgets.alerts", "预警", "Alerts"),
    ("budgets.thresholds", "预警阈值", "Alert thresholds"),
    ("budgets.no_alert", "正常", "ok"),
    ("budgets.basis.actual", "实际", "actual"),
    ("budgets.basis.forecast", "预测", "forecast"),
    ("budgets.none", "本月还没有设置预算。", "No budget is set for this month."),
    ("budgets.set", "设置团队预算", "Set a team's budget"),
    ("budgets.amount", "预算金额（元）", "Amount (yuan)"),
    (
        "budgets.thresholds_hint",
        "占预算的比例，逗号分隔，留空为 0.8, 1",
        "Shares of the budget, comma-separated; blank: 0.8, 1",
    ),
    ("budgets.save", "保存预算", "Save the budget"),
    ("budgets.saved", "预算已保存。", "The budget is saved."),
    ("budgets.prev", "上月", "Previous month"),
    ("budgets.next", "下月", "Next month"),
];
