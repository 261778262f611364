//! The words of the adjustments page: key, zh-CN, en.

use super::Word;

pub const WORDS: &[Word] = &[
    ("nav.adjustments", "调账", "Adjustments"),
    ("adjustments.title", "调账（双人审批）", "Adjustments (maker-checker)"),
    (
        "adjustments.hint",
        "财务录入一笔调账（负数为抵减，正数为加收）并写明原因；须由另一位财务或管理员批准后才计入账单。\
         所调月份已结账的，批准后作为追溯调整计入下一个未结账月份。",
        "Finance enters a credit (negative) or debit (positive) with a reason; it reaches a statement only once \
         another finance or admin user approves it. One for a month closed already is booked, once approved, to \
         the next open month as a restatement.",
    ),
    ("adjustments.enter", "录入调账", "Enter an adjustment"),
    ("adjustments.amount", "金额（元，负数为抵减）", "Amount (yuan, negative a credit)"),
    ("adjustments.entered", "已录入，待另一位财务或管理员审批", "Entered: awaiting another finance or admin user"),
    ("adjustments.approve", "批准", "Approve"),
    ("adjustments.reject", "驳回", "Reject"),
    ("adjustments.note", "审批意见", "Note"),
    ("adjustments.approved", "已批准", "approved"),
    ("adjustments.rejected", "已驳回", "rejected"),
    ("adjustments.pending", "待审批", "awaiting approval"),
    ("adjustments.booked", "计入账单", "On the statement of"),
    ("adjustments.decided_by", "审批人", "Decided by"),
    ("adjustments.none", "没有调账。", "No adjustments."),
    ("adjustments.all_months", "全部月份", "All months"),
    (
        "adjustments.own",
        "这笔调账是你录入的：须由另一位财务或管理员审批。",
        "You entered this adjustment: another finance or admin user decides it.",
    ),
    ("adjustments.decided_already", "这笔调账已经审批过了。", "This adjustment was decided already."),
    ("adjustments.done_approved", "已批准", "Approved"),
    ("adjustments.done_rejected", "已驳回", "Rejected"),
    ("adjustments.pending_note", "待审批的调账（不计入合计）：", "Adjustments awaiting approval (in no total): "),
    ("adjustments.link", "调账", "Adjustments"),
    ("adjustments.retry", "结账正在进行，请稍后重试。", "A month is being closed: try again in a moment."),
    ("adjustments.note_invalid", "审批意见无效：", "The note is not valid: "),
];
