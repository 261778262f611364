//! Splitting an amount over teams in proportion to weights, to the fen, without losing or inventing a fen.
//!
//! Rounding each proportional share on its own does not add up: 100.00 yuan over three equal teams is
//! 33.33 × 3 = 99.99. The largest-remainder (Hamilton) method gives every team the floor of its exact
//! quota in fen, then hands the fen still missing, one each, to the largest remainders. The shares then sum
//! *exactly* to the amount, and each is its exact quota rounded down or up — never further off than a fen.
//!
//! Everything is done in integer fen (`u128`) so that remainders compare exactly: a `Decimal` division
//! would round at 28 digits and could break a true tie the wrong way.

use rust_decimal::{Decimal, RoundingStrategy};

use crate::money::Money;

/// Splits `total` over `weights` in proportion, by largest remainder, so that the shares sum exactly to
/// `total`. Equal remainders are broken by position (earlier first): pass the weights in tie-break order
/// (bills pass teams sorted by name). Weights ≤ 0 take no share. A negative `total` (a credit) is split
/// like its magnitude and every share negated.
///
/// Returns `None` when no weight is positive: there is nobody to split over, and the caller keeps it.
pub fn largest_remainder(total: Money, weights: &[Money]) -> Option<Vec<Money>> {
    let w: Vec<u128> = weights.iter().map(|&m| u128::try_from(fen(m)).unwrap_or(0)).collect();
    let sum: u128 = w.iter().sum();
    if sum == 0 {
        return None;
    }
    let total_fen = fen(total);
    let n = total_fen.unsigned_abs();

    // Exact quota of team i: n·w_i / sum = q_i + r_i / sum.
    let (mut shares, remainders): (Vec<u128>, Vec<u128>) = w.iter().map(|&wi| mul_div_rem(n, wi, sum)).unzip();
    // Σ q_i ≤ n and n − Σ q_i = Σ r_i / sum < the number of non-zero remainders, so every missing fen
    // goes to a distinct positive-weight team with a non-zero remainder.
    let missing = n - shares.iter().sum::<u128>();
    let mut order: Vec<usize> = (0..w.len()).filter(|&i| w[i] > 0).collect();
    order.sort_by(|&a, &b| remainders[b].cmp(&remainders[a]).then(a.cmp(&b)));
    for &i in order.iter().take(usize::try_from(missing).unwrap_or(usize::MAX)) {
        shares[i] += 1;
    }

    let negative = total_fen < 0;
    Some(shares.into_iter().map(|s| from_fen(s, negative)).collect())
}

/// An amount in whole fen. A `Money` has at most two decimals; one deserialised with more is first rounded
/// half up, as `Money` itself would.
fn fen(m: Money) -> i128 {
    let d = m.as_decimal().round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
    // mantissa < 2^96 and scale ≤ 2, so this fits an i128 with room to spare.
    d.mantissa() * 10i128.pow(2 - d.scale())
}

fn from_fen(fen: u128, negative: bool) -> Money {
    // Built as yuan + fen so that the mantissa stays within Decimal's 96 bits whenever the yuan part does.
    let yuan = i128::try_from(fen / 100).expect("a share is at most the split amount");
    let cents = i64::try_from(fen % 100).expect("below 100");
    let d = Decimal::from_i128_with_scale(yuan, 0) + Decimal::new(cents, 2);
    Money::from_decimal(if negative { -d } else { d })
}

/// `(a·b / d, a·b mod d)` exactly, for `d > 0` and `b ≤ d` (so the quotient is at most `a`). Amounts of any
/// realistic size take the direct path; the product of two 100-bit amounts overflows `u128`, so then it is
/// built bit by bit keeping `acc = q·d + r` with `r < d`.
fn mul_div_rem(a: u128, b: u128, d: u128) -> (u128, u128) {
    if let Some(p) = a.checked_mul(b) {
        return (p / d, p % d);
    }
    let (mut q, mut r) = (0u128, 0u128);
    for bit in (0..u128::BITS - b.leading_zeros()).rev() {
        // acc ← 2·acc
        q <<= 1;
        r <<= 1;
        if r >= d {
            r -= d;
            q += 1;
        }
        // acc ← acc + a (if this bit of b is set)
        if (b >> bit) & 1 == 1 {
            r += a;
            q += r / d;
            r %= d;
        }
    }
    (q, r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rust_decimal_macros::dec;

    fn m(d: Decimal) -> Money {
        Money::from_decimal(d)
    }

    fn strings(v: Vec<Money>) -> Vec<String> {
        v.into_iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn three_equal_teams_do_not_lose_a_fen() {
        // 100.00 / 3 = 33.333…: naive rounding gives 33.33 × 3 = 99.99. In fen: 10000 / 3 = 3333 r 1 each,
        // one fen missing, all remainders tie → the first team (by name) gets it.
        let shares = largest_remainder(m(dec!(100)), &[m(dec!(5)), m(dec!(5)), m(dec!(5))]).unwrap();
        assert_eq!(strings(shares), ["33.34", "33.33", "33.33"]);
    }

    #[test]
    fn three_equal_teams_do_not_invent_a_fen() {
        // 0.02 / 3 = 0.00667: naive rounding gives 0.01 × 3 = 0.03. Floors are 0, two fen missing → the
        // first two teams.
        let shares = largest_remainder(m(dec!(0.02)), &[m(dec!(1)), m(dec!(1)), m(dec!(1))]).unwrap();
        assert_eq!(strings(shares), ["0.01", "0.01", "0.00"]);
    }

    #[test]
    fn unequal_weights_go_by_remainder() {
        // 1.00 over weights 1, 2, 4 (sum 7): 100·1/7 = 14 r 2, 100·2/7 = 28 r 4, 100·4/7 = 57 r 1 (in 1/7 fen).
        // Floors sum to 99; the missing fen goes to the largest remainder, the second team.
        let shares = largest_remainder(m(dec!(1)), &[m(dec!(1)), m(dec!(2)), m(dec!(4))]).unwrap();
        assert_eq!(strings(shares), ["0.14", "0.29", "0.57"]);
    }

    #[test]
    fn negative_amounts_split_as_credits() {
        // −50.00 over 100.00 and 50.00: 5000·100/150 = 3333 r 50, 5000·50/150 = 1666 r 100 (in 1/150 fen);
        // the missing fen goes to the second → −33.33, −16.67.
        let shares = largest_remainder(m(dec!(-50)), &[m(dec!(100)), m(dec!(50))]).unwrap();
        assert_eq!(strings(shares), ["-33.33", "-16.67"]);
    }

    #[test]
    fn non_positive_weights_take_nothing() {
        let shares = largest_remainder(m(dec!(10)), &[Money::ZERO, m(dec!(3)), m(dec!(-3))]).unwrap();
        assert_eq!(strings(shares), ["0.00", "10.00", "0.00"]);
        assert_eq!(largest_remainder(m(dec!(10)), &[Money::ZERO, Money::ZERO]), None);
        assert_eq!(largest_remainder(m(dec!(10)), &[]), None);
    }

    #[test]
    fn huge_amounts_take_the_exact_slow_path() {
        // 10^25 yuan = 10^27 fen: the products overflow u128, the result must still be exact.
        let big = m(dec!(10000000000000000000000000));
        let shares = largest_remainder(big, &[big, big, big]).unwrap();
        assert_eq!(shares.iter().copied().sum::<Money>(), big);
        assert_eq!(shares[0].to_string(), "3333333333333333333333333.34");
        assert_eq!(shares[1].to_string(), "3333333333333333333333333.33");
        // 6x / 9 = 2x / 3; 6x mod 9 = 3 · (2x mod 3).
        let x = u128::MAX / 3;
        assert_eq!(mul_div_rem(x, 6, 9), (x * 2 / 3, 3 * ((x * 2) % 3)));
    }

    proptest! {
        #[test]
        fn shares_sum_exactly_and_stay_within_a_fen(
            total in -1_000_000_000i64..1_000_000_000, // fen: ±10 million yuan
            weights in prop::collection::vec(-100_000i64..1_000_000_000, 0..8),
        ) {
            let total_m = Money::from_decimal(Decimal::new(total, 2));
            let ws: Vec<Money> = weights.iter().map(|&w| Money::from_decimal(Decimal::new(w, 2))).collect();
            let positive: i128 = weights.iter().filter(|&&w| w > 0).map(|&w| i128::from(w)).sum();
            match largest_remainder(total_m, &ws) {
                None => prop_assert_eq!(positive, 0),
                Some(shares) => {
                    prop_assert_eq!(shares.len(), ws.len());
                    prop_assert_eq!(shares.iter().copied().sum::<Money>(), total_m);
                    for (s, &w) in shares.iter().zip(&weights) {
                        let s_fen = fen(*s);
                        if w <= 0 {
                            prop_assert_eq!(s_fen, 0);
                            continue;
                        }
                        // |share − exact quota| < 1 fen, i.e. |s·P − T·w| < P with everything in fen.
                        let off = s_fen * positive - i128::from(total) * i128::from(w);
                        prop_assert!(off.abs() < positive, "share {} off its quota", s);
                    }
                    // Monotone: a larger weight never gets a smaller share in magnitude.
                    for i in 0..ws.len() {
                        for j in 0..ws.len() {
                            if weights[i] > weights[j] {
                                prop_assert!(fen(shares[i]).abs() >= fen(shares[j]).abs());
                            }
                        }
                    }
                }
            }
        }
    }
}
