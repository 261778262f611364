//! Total cost of ownership of one card per year, and the rate in yuan per card-hour that recovers it (SPEC §5).
//!
//! [`TcoInputs`] is what a client sends; [`TcoInputs::validate`] turns it into a [`Tco`] or lists every bad field
//! (parse, don't validate: a `Tco` exists only with sane inputs, so its breakdown cannot fail or overflow).
//!
//! ```text
//! hardware per year = (card price + server share per card) / depreciation years
//! power per year    = avg power (kW) × 8760 × PUE × electricity price (yuan/kWh) × system factor
//! annual TCO        = hardware + power + datacenter & network + operations staff   (per card per year)
//! rate              = annual TCO / (8760 × recovery utilization), half up to 4 decimals
//! ```
//!
//! A year is 8760 hours (365 days) in every year, leap or not, as in the SPEC: the rate is a price, not a
//! calendar computation, and a leap day's hours are billed at the same rate as any other.

use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde::{Deserialize, Serialize};

use super::{FieldError, PricingError};
use crate::money::{Money, RatePerCardHour};
use crate::validate::DecimalRange;

/// Hours in a (365-day) year.
pub const HOURS_PER_YEAR: Decimal = dec!(8760);

// Upper bounds nobody meets in practice. They are there so that every figure of a validated `Tco` is far inside
// `Decimal`'s range (whose arithmetic panics on overflow) and to catch a unit slip (fen for yuan, W for kW).
// Each is read by the check below and written into the OpenAPI document as the field's pattern.
pub const YUAN: DecimalRange = DecimalRange::closed(0, 1_000_000_000);
pub const ELECTRICITY_PRICE: DecimalRange = DecimalRange::closed(0, 1000);
pub const FACTOR: DecimalRange = DecimalRange::closed(1, 10);
pub const POWER_KW: DecimalRange = DecimalRange::above(0, 5);
pub const YEARS: DecimalRange = DecimalRange::closed(1, 10);
pub const SHARE: DecimalRange = DecimalRange::above(0, 1);

/// TCO inputs of one GPU model, per card, as sent by a client and stored (SPEC §5: all inputs stored and shown).
/// Amounts in yuan; `avg_power_kw` in kW per card; `electricity_price` in yuan per kWh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TcoInputs {
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub card_price: Decimal,
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub server_share_per_card: Decimal,
    /// Straight-line depreciation period; typically 3–5, accepted 1–10 (fractions of a year allowed).
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub depreciation_years: Decimal,
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub avg_power_kw: Decimal,
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub pue: Decimal,
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub electricity_price: Decimal,
    /// CPU, NIC, storage… drawn per card on top of the card itself, e.g. 1.2.
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub system_factor: Decimal,
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub datacenter_per_card_year: Decimal,
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub staff_per_card_year: Decimal,
    /// Share of the card's hours that are sold (allocated); the rate recovers the full annual cost at this share.
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub recovery_utilization: Decimal,
}

impl TcoInputs {
    /// Checks every field and returns the validated [`Tco`], or every offending field at once.
    pub fn validate(self) -> Result<Tco, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut check = |field: &'static str, value: Decimal, range: DecimalRange, unit: &str| {
            if !range.contains(value) {
                errors.push(FieldError::new(field, format!("must be {}{unit}, got {value}", range.describe())));
            }
        };
        check("card_price", self.card_price, YUAN, " yuan");
        check("server_share_per_card", self.server_share_per_card, YUAN, " yuan");
        check("depreciation_years", self.depreciation_years, YEARS, " years (typically 3–5)");
        check("avg_power_kw", self.avg_power_kw, POWER_KW, " kW per card");
        check("pue", self.pue, FACTOR, "");
        check("electricity_price", self.electricity_price, ELECTRICITY_PRICE, " yuan per kWh");
        check("system_factor", self.system_factor, FACTOR, "");
        check("datacenter_per_card_year", self.datacenter_per_card_year, YUAN, " yuan");
        check("staff_per_card_year", self.staff_per_card_year, YUAN, " yuan");
        check("recovery_utilization", self.recovery_utilization, SHARE, " (a share, not a percent)");
        if !errors.is_empty() {
            return Err(errors);
        }
        match compute(&self) {
            Some(breakdown) => Ok(Tco { inputs: self, breakdown }),
            // Only the final division can overflow within the bounds above: a vanishing recovery utilization.
            None => Err(vec![FieldError::new(
                "recovery_utilization",
                format!("is too small: the rate would be out of range, got {}", self.recovery_utilization),
            )]),
        }
    }
}

/// The yearly cost lines behind a rate, per card. The `Money` fields are for display (rounded half up to the fen);
/// [`RateBreakdown::exact`] holds the unrounded figures the rate is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RateBreakdown {
    pub hardware_per_year: Money,
    /// Power before the system factor (the SPEC's worked example: 0.5 kW × 8760 × 1.4 × 0.8 = 4,905.60).
    pub power_per_year_before_system_factor: Money,
    pub power_per_year: Money,
    pub datacenter_per_year: Money,
    pub staff_per_year: Money,
    /// The sum of the four displayed lines above (a total is the sum of its lines). It can differ from the exact
    /// annual TCO rounded to the fen by a fen or two when a line is not a whole number of fen.
    pub annual_tco: Money,
    /// The rate in yuan per card-hour, from the *exact* annual TCO.
    pub rate: RatePerCardHour,
    #[serde(skip)]
    pub exact: ExactBreakdown,
}

/// The unrounded yearly figures (hardware can be a repeating decimal; it is carried at `Decimal` precision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactBreakdown {
    pub hardware_per_year: Decimal,
    pub power_per_year_before_system_factor: Decimal,
    pub power_per_year: Decimal,
    pub datacenter_per_year: Decimal,
    pub staff_per_year: Decimal,
    pub annual_tco: Decimal,
    /// The rate before rounding to 4 decimals.
    pub rate: Decimal,
}

/// Validated TCO of one GPU model. Serialized as its [`TcoInputs`]; deserializing validates them again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TcoInputs", into = "TcoInputs")]
pub struct Tco {
    inputs: TcoInputs,
    // Computed once at validation (where overflow is checked), so `breakdown()` cannot fail.
    breakdown: RateBreakdown,
}

impl Tco {
    pub fn inputs(&self) -> &TcoInputs {
        &self.inputs
    }
    pub fn card_price(&self) -> Decimal {
        self.inputs.card_price
    }
    pub fn server_share_per_card(&self) -> Decimal {
        self.inputs.server_share_per_card
    }
    pub fn depreciation_years(&self) -> Decimal {
        self.inputs.depreciation_years
    }
    pub fn avg_power_kw(&self) -> Decimal {
        self.inputs.avg_power_kw
    }
    pub fn pue(&self) -> Decimal {
        self.inputs.pue
    }
    pub fn electricity_price(&self) -> Decimal {
        self.inputs.electricity_price
    }
    pub fn system_factor(&self) -> Decimal {
        self.inputs.system_factor
    }
    pub fn datacenter_per_card_year(&self) -> Decimal {
        self.inputs.datacenter_per_card_year
    }
    pub fn staff_per_card_year(&self) -> Decimal {
        self.inputs.staff_per_card_year
    }
    pub fn recovery_utilization(&self) -> Decimal {
        self.inputs.recovery_utilization
    }

    /// The yearly lines and the rate.
    pub fn breakdown(&self) -> RateBreakdown {
        self.breakdown.clone()
    }

    /// The rate in yuan per card-hour (4 decimals).
    pub fn rate(&self) -> RatePerCardHour {
        self.breakdown.rate
    }

    /// The exact annual TCO per card, the base of [`super::rent_vs_build`].
    pub fn annual_tco(&self) -> Decimal {
        self.breakdown.exact.annual_tco
    }
}

impl TryFrom<TcoInputs> for Tco {
    type Error = PricingError;
    fn try_from(inputs: TcoInputs) -> Result<Self, PricingError> {
        inputs.validate().map_err(PricingError::Invalid)
    }
}

impl From<Tco> for TcoInputs {
    fn from(tco: Tco) -> Self {
        tco.inputs
    }
}

/// The breakdown of already range-checked inputs; `None` only if the rate is out of `Decimal`'s range.
fn compute(i: &TcoInputs) -> Option<RateBreakdown> {
    let hardware = (i.card_price + i.server_share_per_card) / i.depreciation_years;
    let power_before = i.avg_power_kw * HOURS_PER_YEAR * i.pue * i.electricity_price;
    let power = power_before * i.system_factor;
    let annual = hardware + power + i.datacenter_per_card_year + i.staff_per_card_year;
    let rate_exact = annual.checked_div(HOURS_PER_YEAR * i.recovery_utilization)?;
    let exact = ExactBreakdown {
        hardware_per_year: hardware,
        power_per_year_before_system_factor: power_before,
        power_per_year: power,
        datacenter_per_year: i.datacenter_per_card_year,
        staff_per_year: i.staff_per_card_year,
        annual_tco: annual,
        rate: rate_exact,
    };
    let lines = [hardware, power, i.datacenter_per_card_year, i.staff_per_card_year].map(Money::round_fen);
    Some(RateBreakdown {
        hardware_per_year: lines[0],
        power_per_year_before_system_factor: Money::round_fen(power_before),
        power_per_year: lines[1],
        datacenter_per_year: lines[2],
        staff_per_year: lines[3],
        annual_tco: lines.into_iter().sum(),
        // Every term is ≥ 0, so the rate is never negative and `new` cannot refuse it.
        rate: RatePerCardHour::new(rate_exact)?,
        exact,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The A100 example of the brief.
    pub(crate) fn a100() -> TcoInputs {
        TcoInputs {
            card_price: dec!(80000),
            server_share_per_card: dec!(40000),
            depreciation_years: dec!(5),
            avg_power_kw: dec!(0.5),
            pue: dec!(1.4),
            electricity_price: dec!(0.8),
            system_factor: dec!(1.2),
            datacenter_per_card_year: dec!(3000),
            staff_per_card_year: dec!(2000),
            recovery_utilization: dec!(0.7),
        }
    }

    #[test]
    fn spec_worked_example_power_before_system_factor() {
        let b = a100().validate().unwrap().breakdown();
        // 0.5 kW × 8760 h × 1.4 × 0.8 yuan/kWh = 4,905.60 yuan per card-year (SPEC §5).
        assert_eq!(b.exact.power_per_year_before_system_factor, dec!(4905.6));
        assert_eq!(b.power_per_year_before_system_factor.to_string(), "4905.60");
    }

    #[test]
    fn a100_rate_by_hand() {
        // hardware   = (80,000 + 40,000) / 5          = 24,000.00
        // power      = 4,905.60 × 1.2                 =  5,886.72
        // datacenter                                  =  3,000.00
        // staff                                       =  2,000.00
        // annual TCO                                  = 34,886.72
        // rate       = 34,886.72 / (8760 × 0.7)
        //            = 34,886.72 / 6,132              =  5.68928897586431833…  → 5.6893 yuan/card-hour
        let tco = a100().validate().unwrap();
        let b = tco.breakdown();
        assert_eq!(b.exact.hardware_per_year, dec!(24000));
        assert_eq!(b.exact.power_per_year, dec!(5886.72));
        assert_eq!(b.exact.annual_tco, dec!(34886.72));
        assert_eq!(b.hardware_per_year.to_string(), "24000.00");
        assert_eq!(b.power_per_year.to_string(), "5886.72");
        assert_eq!(b.datacenter_per_year.to_string(), "3000.00");
        assert_eq!(b.staff_per_year.to_string(), "2000.00");
        assert_eq!(b.annual_tco.to_string(), "34886.72");
        assert!((b.exact.rate - dec!(5.689288975864318330071754729)).abs() < dec!(0.000000000000000000001));
        assert_eq!(b.rate.to_string(), "5.6893");
        assert_eq!(tco.rate(), b.rate);
        assert_eq!(tco.annual_tco(), dec!(34886.72));
    }

    #[test]
    fn full_recovery_and_repeating_hardware() {
        // 3 years: (100,000 + 0) / 3 = 33,333.333…; displayed 33,333.33; the rate uses the exact figure.
        let inputs = TcoInputs {
            card_price: dec!(100000),
            server_share_per_card: dec!(0),
            depreciation_years: dec!(3),
            electricity_price: dec!(0),
            datacenter_per_card_year: dec!(0),
            staff_per_card_year: dec!(0),
            recovery_utilization: dec!(1),
            ..a100()
        };
        let b = inputs.validate().unwrap().breakdown();
        assert_eq!(b.hardware_per_year.to_string(), "33333.33");
        assert_eq!(b.power_per_year.to_string(), "0.00");
        assert_eq!(b.annual_tco.to_string(), "33333.33");
        // 100,000 / 3 / 8760 = 3.80517503805…
        assert_eq!(b.rate.to_string(), "3.8052");
    }

    #[test]
    fn every_bad_field_is_reported() {
        let bad = TcoInputs {
            card_price: dec!(-1),
            server_share_per_card: dec!(-0.01),
            depreciation_years: dec!(0),
            avg_power_kw: dec!(0),
            pue: dec!(0.99),
            electricity_price: dec!(-0.8),
            system_factor: dec!(0.9),
            datacenter_per_card_year: dec!(-3000),
            staff_per_card_year: dec!(-1),
            recovery_utilization: dec!(0),
        };
        let errors = bad.validate().unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "card_price",
                "server_share_per_card",
                "depreciation_years",
                "avg_power_kw",
                "pue",
                "electricity_price",
                "system_factor",
                "datacenter_per_card_year",
                "staff_per_card_year",
                "recovery_utilization",
            ]
        );
        assert!(errors[2].message.contains("got 0"), "{}", errors[2].message);
    }

    #[test]
    fn boundaries() {
        let ok = |i: TcoInputs| i.validate().is_ok();
        assert!(ok(TcoInputs { depreciation_years: dec!(1), ..a100() }));
        assert!(ok(TcoInputs { depreciation_years: dec!(10), ..a100() }));
        assert!(!ok(TcoInputs { depreciation_years: dec!(10.5), ..a100() }));
        assert!(!ok(TcoInputs { depreciation_years: dec!(0.5), ..a100() }));
        assert!(ok(TcoInputs { pue: dec!(1), system_factor: dec!(1), ..a100() }));
        assert!(ok(TcoInputs { recovery_utilization: dec!(1), ..a100() }));
        assert!(!ok(TcoInputs { recovery_utilization: dec!(1.0001), ..a100() }));
        assert!(!ok(TcoInputs { recovery_utilization: dec!(70), ..a100() }));
        assert!(!ok(TcoInputs { recovery_utilization: dec!(-0.5), ..a100() }));
        assert!(ok(TcoInputs { avg_power_kw: dec!(5), ..a100() }));
        assert!(!ok(TcoInputs { avg_power_kw: dec!(5.001), ..a100() }));
        // 500 W typed as W, not kW.
        assert!(!ok(TcoInputs { avg_power_kw: dec!(500), ..a100() }));
        assert!(!ok(TcoInputs { avg_power_kw: dec!(-0.5), ..a100() }));
        assert!(ok(TcoInputs { card_price: dec!(0), electricity_price: dec!(0), ..a100() }));
    }

    #[test]
    fn a_vanishing_recovery_utilization_is_refused_not_a_panic() {
        let i = TcoInputs {
            card_price: Decimal::from(YUAN.max),
            recovery_utilization: dec!(0.0000000000000000000000000001),
            ..a100()
        };
        let errors = i.validate().unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "recovery_utilization");
        // The largest accepted inputs do not overflow at any sane recovery utilization.
        let max = TcoInputs {
            card_price: Decimal::from(YUAN.max),
            server_share_per_card: Decimal::from(YUAN.max),
            depreciation_years: Decimal::from(YEARS.min),
            avg_power_kw: Decimal::from(POWER_KW.max),
            pue: Decimal::from(FACTOR.max),
            electricity_price: Decimal::from(ELECTRICITY_PRICE.max),
            system_factor: Decimal::from(FACTOR.max),
            datacenter_per_card_year: Decimal::from(YUAN.max),
            staff_per_card_year: Decimal::from(YUAN.max),
            recovery_utilization: dec!(0.000001),
        };
        assert!(max.validate().is_ok());
    }

    #[test]
    fn json_round_trip_validates() {
        let json = r#"{"card_price":"80000","server_share_per_card":"40000","depreciation_years":"5",
            "avg_power_kw":"0.5","pue":"1.4","electricity_price":"0.8","system_factor":"1.2",
            "datacenter_per_card_year":"3000","staff_per_card_year":"2000","recovery_utilization":"0.7"}"#;
        let tco: Tco = serde_json::from_str(json).unwrap();
        assert_eq!(tco.rate().to_string(), "5.6893");
        let back: Tco = serde_json::from_str(&serde_json::to_string(&tco).unwrap()).unwrap();
        assert_eq!(back, tco);
        let bad = json.replace(r#""pue":"1.4""#, r#""pue":"0.5""#);
        let err = serde_json::from_str::<Tco>(&bad).unwrap_err().to_string();
        assert!(err.contains("pue"), "{err}");
        let unknown = json.replace(r#""pue""#, r#""puee""#);
        assert!(serde_json::from_str::<TcoInputs>(&unknown).is_err());
        let shown = serde_json::to_value(tco.breakdown()).unwrap();
        assert_eq!(shown["rate"], "5.6893");
        assert_eq!(shown["power_per_year_before_system_factor"], "4905.60");
        assert!(shown.get("exact").is_none());
    }

    /// Valid inputs from integers, so every generated value is an exact decimal.
    pub(crate) fn inputs() -> impl Strategy<Value = TcoInputs> {
        (
            (0i64..=50_000_000, 0i64..=50_000_000, 10i64..=100, 1i64..=5000),
            (1000i64..=3000, 0i64..=300, 1000i64..=2000),
            (0i64..=1_000_000, 0i64..=1_000_000, 1i64..=100),
        )
            .prop_map(|((card, server, years, kw), (pue, price, factor), (dc, staff, rec))| TcoInputs {
                card_price: Decimal::new(card, 2),
                server_share_per_card: Decimal::new(server, 2),
                depreciation_years: Decimal::new(years, 1),
                avg_power_kw: Decimal::new(kw, 3),
                pue: Decimal::new(pue, 3),
                electricity_price: Decimal::new(price, 2),
                system_factor: Decimal::new(factor, 3),
                datacenter_per_card_year: Decimal::new(dc, 2),
                staff_per_card_year: Decimal::new(staff, 2),
                recovery_utilization: Decimal::new(rec, 2),
            })
    }

    /// How to move one input inside its valid range: a setter, the range, and whether the input has an effect on
    /// the rate at these inputs (e.g. PUE has none when electricity is free).
    struct Knob {
        name: &'static str,
        set: fn(&mut TcoInputs, Decimal),
        lo: Decimal,
        hi: Decimal,
        /// +1: the rate rises with the input; −1: it falls.
        direction: i32,
        has_effect: fn(&TcoInputs) -> bool,
    }

    fn knob(
        name: &'static str,
        set: fn(&mut TcoInputs, Decimal),
        (lo, hi): (Decimal, Decimal),
        direction: i32,
        has_effect: fn(&TcoInputs) -> bool,
    ) -> Knob {
        Knob { name, set, lo, hi, direction, has_effect }
    }

    fn knobs() -> Vec<Knob> {
        let always = |_: &TcoInputs| true;
        let uses_power = |i: &TcoInputs| !i.electricity_price.is_zero();
        vec![
            knob("card_price", |i, v| i.card_price = v, (dec!(0), dec!(500000)), 1, always),
            knob("server_share_per_card", |i, v| i.server_share_per_card = v, (dec!(0), dec!(500000)), 1, always),
            knob("avg_power_kw", |i, v| i.avg_power_kw = v, (dec!(0.001), dec!(5)), 1, uses_power),
            knob("pue", |i, v| i.pue = v, (dec!(1), dec!(3)), 1, uses_power),
            knob("electricity_price", |i, v| i.electricity_price = v, (dec!(0), dec!(3)), 1, always),
            knob("system_factor", |i, v| i.system_factor = v, (dec!(1), dec!(2)), 1, uses_power),
            knob("datacenter_per_card_year", |i, v| i.datacenter_per_card_year = v, (dec!(0), dec!(10000)), 1, always),
            knob("staff_per_card_year", |i, v| i.staff_per_card_year = v, (dec!(0), dec!(10000)), 1, always),
            knob(
                "recovery_utilization",
                |i, v| i.recovery_utilization = v,
                (dec!(0.01), dec!(1)),
                -1,
                |i| !annual_of(i).is_zero(),
            ),
            knob(
                "depreciation_years",
                |i, v| i.depreciation_years = v,
                (dec!(1), dec!(10)),
                -1,
                |i| !(i.card_price + i.server_share_per_card).is_zero(),
            ),
        ]
    }

    fn annual_of(i: &TcoInputs) -> Decimal {
        i.clone().validate().unwrap().annual_tco()
    }

    proptest! {
        #[test]
        fn rate_is_monotonic_in_every_input(base in inputs(), knob in 0usize..10, a in 0u32..=10_000, b in 0u32..=10_000) {
            let k = &knobs()[knob];
            let at = |step: u32| k.lo + (k.hi - k.lo) * Decimal::from(step) / dec!(10000);
            let (small, large) = (at(a.min(b)), at(a.max(b)));
            let mut lo_inputs = base.clone();
            (k.set)(&mut lo_inputs, small);
            let mut hi_inputs = base;
            (k.set)(&mut hi_inputs, large);
            let effect = (k.has_effect)(&lo_inputs);
            let lo = lo_inputs.validate().unwrap().breakdown();
            let hi = hi_inputs.validate().unwrap().breakdown();
            let (first, second) = if k.direction > 0 { (&lo, &hi) } else { (&hi, &lo) };
            // The printed (4-decimal) rate never moves the wrong way; the exact one moves strictly when it can.
            prop_assert!(first.rate <= second.rate, "{}: {} > {}", k.name, first.rate, second.rate);
            prop_assert!(first.exact.rate <= second.exact.rate, "{}", k.name);
            if small < large && effect {
                prop_assert!(first.exact.rate < second.exact.rate, "{}: {} !< {}", k.name, first.exact.rate, second.exact.rate);
            }
        }

        #[test]
        fn displayed_total_is_the_sum_of_displayed_lines(i in inputs()) {
            let b = i.validate().unwrap().breakdown();
            prop_assert_eq!(b.annual_tco, b.hardware_per_year + b.power_per_year + b.datacenter_per_year + b.staff_per_year);
            prop_assert_eq!(Some(b.rate), RatePerCardHour::new(b.exact.rate));
        }
    }
}
