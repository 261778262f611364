//! Rate history: every GPU model's rates with the date each became effective, kept for ever (SPEC §5: "a change
//! mid-month splits the month; old rates are kept; bills show the rate used").
//!
//! An effective-from date is a calendar date in the billing time zone; the rate applies from that date's local
//! midnight. [`RateHistory::segments`] cuts a half-open period `[from, to)` exactly at those instants, so a month
//! with a rate change is billed as two (or more) pieces whose lengths add up to the month, and the part of a
//! period before a model's first rate comes back as a gap (`rate: None`) for the caller to report — never as a
//! silent zero.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, TimeZone};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use super::{FieldError, PricingError, Tco};
use crate::money::RatePerCardHour;

/// Where a rate comes from: computed from stored TCO inputs, or set by hand (e.g. a negotiated or cloud rate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "inputs", rename_all = "snake_case")]
pub enum RateSource {
    /// Boxed: a `Tco` carries its inputs and breakdown, far larger than `Manual`.
    Tco(Box<Tco>),
    Manual,
}

/// One rate of one model, effective from a date (in the billing time zone) until the model's next version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateVersion {
    /// The pricing key (see [`super::ModelCatalog`]), e.g. `A100-80GB`.
    pub gpu_model: String,
    pub effective_from: NaiveDate,
    pub rate: RatePerCardHour,
    pub source: RateSource,
}

impl RateVersion {
    /// A version at the TCO's own rate.
    pub fn from_tco(gpu_model: impl Into<String>, effective_from: NaiveDate, tco: Tco) -> Self {
        Self { gpu_model: gpu_model.into(), effective_from, rate: tco.rate(), source: RateSource::Tco(Box::new(tco)) }
    }

    /// A version with a rate set by hand.
    pub fn manual(gpu_model: impl Into<String>, effective_from: NaiveDate, rate: RatePerCardHour) -> Self {
        Self { gpu_model: gpu_model.into(), effective_from, rate, source: RateSource::Manual }
    }
}

/// A piece of a period during which one rate applies; `rate` is `None` before the model's first version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RateSegment {
    pub from: DateTime<Tz>,
    pub to: DateTime<Tz>,
    pub rate: Option<RatePerCardHour>,
    /// The effective-from date of the version used (what a bill shows next to the rate); `None` in a gap.
    pub effective_from: Option<NaiveDate>,
}

impl RateSegment {
    pub fn duration(&self) -> TimeDelta {
        self.to - self.from
    }

    /// No rate was in effect: the caller reports these hours as unpriced.
    pub fn is_gap(&self) -> bool {
        self.rate.is_none()
    }
}

/// All rate versions, per model in effective-from order. At most one version per model and date.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateHistory {
    by_model: BTreeMap<String, Vec<RateVersion>>,
}

impl RateHistory {
    /// Builds the history, refusing (all at once): an empty or padded model key, a TCO-sourced version whose rate
    /// is not its TCO's rate, and two versions of one model on the same date (field `effective_from`).
    pub fn new(versions: impl IntoIterator<Item = RateVersion>) -> Result<Self, PricingError> {
        let mut errors = Vec::new();
        let mut by_model: BTreeMap<String, Vec<RateVersion>> = BTreeMap::new();
        for v in versions {
            if v.gpu_model.trim().is_empty() {
                errors.push(FieldError::new("gpu_model", "must not be empty"));
                continue;
            }
            if v.gpu_model.trim() != v.gpu_model {
                errors.push(FieldError::new(
                    "gpu_model",
                    format!("must not start or end with spaces: {:?}", v.gpu_model),
                ));
                continue;
            }
            if let RateSource::Tco(tco) = &v.source
                && tco.rate() != v.rate
            {
                // A bill shows the rate used and its TCO; the two must tell the same story.
                errors.push(FieldError::new(
                    "rate",
                    format!(
                        "{} from {}: {} is not its TCO's rate {}",
                        v.gpu_model,
                        v.effective_from,
                        v.rate,
                        tco.rate()
                    ),
                ));
            }
            by_model.entry(v.gpu_model.clone()).or_default().push(v);
        }
        for (model, versions) in &mut by_model {
            versions.sort_by_key(|v| v.effective_from);
            for pair in versions.windows(2) {
                if pair[0].effective_from == pair[1].effective_from {
                    errors.push(FieldError::new(
                        "effective_from",
                        format!("{model} has two rates effective from {}", pair[0].effective_from),
                    ));
                }
            }
        }
        if errors.is_empty() { Ok(Self { by_model }) } else { Err(PricingError::Invalid(errors)) }
    }

    /// The models that have at least one version, in key order.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.by_model.keys().map(String::as_str)
    }

    /// A model's versions, oldest first; empty for an unknown model.
    pub fn versions(&self, model: &str) -> &[RateVersion] {
        self.by_model.get(model).map_or(&[], Vec::as_slice)
    }

    /// The version in effect on `date` (the latest effective on or before it).
    pub fn version_at(&self, model: &str, date: NaiveDate) -> Option<&RateVersion> {
        let versions = self.versions(model);
        let after = versions.partition_point(|v| v.effective_from <= date);
        after.checked_sub(1).map(|i| &versions[i])
    }

    /// The rate in effect on `date`; `None` before the model's first version or for an unknown model.
    pub fn rate_at(&self, model: &str, date: NaiveDate) -> Option<RatePerCardHour> {
        self.version_at(model, date).map(|v| v.rate)
    }

    /// Splits `[from, to)` at every effective-from boundary of `model` (local midnight in `from`'s time zone; `to`
    /// is read in that zone too). The segments are ordered, non-empty, and tile the period exactly; a part
    /// before the first version (or all of it, for an unknown model) is a gap. Empty when `from >= to`.
    pub fn segments(&self, model: &str, from: DateTime<Tz>, to: DateTime<Tz>) -> Vec<RateSegment> {
        let tz = from.timezone();
        let to = to.with_timezone(&tz);
        if from >= to {
            return Vec::new();
        }
        let mut starts: Vec<(DateTime<Tz>, &RateVersion)> =
            self.versions(model).iter().map(|v| (start_of_day(tz, v.effective_from), v)).collect();
        // Already in order for every real zone; the stable sort keeps date order where two dates share an instant
        // (a day skipped by the date line), so the later date wins there.
        starts.sort_by_key(|(start, _)| *start);

        let first_after = starts.partition_point(|(start, _)| *start <= from);
        let mut current = first_after.checked_sub(1).map(|i| starts[i].1);
        let mut cursor = from;
        let mut segments = Vec::new();
        for &(start, version) in &starts[first_after..] {
            if start >= to {
                break;
            }
            if start > cursor {
                segments.push(segment(cursor, start, current));
                cursor = start;
            }
            current = Some(version);
        }
        segments.push(segment(cursor, to, current));
        segments
    }
}

fn segment(from: DateTime<Tz>, to: DateTime<Tz>, version: Option<&RateVersion>) -> RateSegment {
    RateSegment { from, to, rate: version.map(|v| v.rate), effective_from: version.map(|v| v.effective_from) }
}

/// The instant `date` begins in `tz`: its local midnight; the first one where clocks fall back across midnight;
/// where a clock change skips midnight, the first local minute that exists (the change itself).
pub fn start_of_day(tz: Tz, date: NaiveDate) -> DateTime<Tz> {
    let midnight = date.and_time(NaiveTime::MIN);
    if let Some(start) = tz.from_local_datetime(&midnight).earliest() {
        return start;
    }
    // Three days covers any real skip (Samoa skipped a whole day in 2011); the search runs only for skipped
    // midnights. The final fallback (midnight read as UTC) is unreachable with the tz database.
    (1..=3 * 24 * 60)
        .find_map(|minute| tz.from_local_datetime(&(midnight + TimeDelta::minutes(minute))).earliest())
        .unwrap_or_else(|| tz.from_utc_datetime(&midnight))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::tco::tests::a100;
    use chrono::Utc;
    use proptest::prelude::*;
    use rust_decimal::Decimal;
    use rust_decimal_macros::dec;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn rate(r: Decimal) -> RatePerCardHour {
        RatePerCardHour::new(r).unwrap()
    }

    fn at(tz: Tz, date: &str) -> DateTime<Tz> {
        start_of_day(tz, d(date))
    }

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn history() -> RateHistory {
        RateHistory::new([
            RateVersion::manual("A100-80GB", d("2024-04-16"), rate(dec!(6))),
            RateVersion::manual("A100-80GB", d("2024-01-01"), rate(dec!(5))),
            RateVersion::from_tco("H100-80GB", d("2024-03-01"), a100().validate().unwrap()),
        ])
        .unwrap()
    }

    #[test]
    fn rate_at_picks_the_latest_effective_version() {
        let h = history();
        assert_eq!(h.rate_at("A100-80GB", d("2023-12-31")), None);
        assert_eq!(h.rate_at("A100-80GB", d("2024-01-01")), Some(rate(dec!(5))));
        assert_eq!(h.rate_at("A100-80GB", d("2024-04-15")), Some(rate(dec!(5))));
        assert_eq!(h.rate_at("A100-80GB", d("2024-04-16")), Some(rate(dec!(6))));
        assert_eq!(h.rate_at("A100-80GB", d("2030-01-01")), Some(rate(dec!(6))));
        assert_eq!(h.rate_at("H100-80GB", d("2024-03-01")).unwrap().to_string(), "5.6893");
        assert_eq!(h.rate_at("L40S", d("2024-03-01")), None);
        assert_eq!(h.models().collect::<Vec<_>>(), ["A100-80GB", "H100-80GB"]);
        assert_eq!(h.versions("A100-80GB")[0].effective_from, d("2024-01-01"));
    }

    #[test]
    fn duplicates_and_inconsistent_versions_are_refused() {
        let err = RateHistory::new([
            RateVersion::manual("A100-80GB", d("2024-04-16"), rate(dec!(6))),
            RateVersion::manual("A100-80GB", d("2024-04-16"), rate(dec!(7))),
            RateVersion::manual("H100-80GB", d("2024-04-16"), rate(dec!(9))),
            RateVersion {
                rate: rate(dec!(1)),
                ..RateVersion::from_tco("L40S", d("2024-01-01"), a100().validate().unwrap())
            },
            RateVersion::manual(" ", d("2024-01-01"), rate(dec!(1))),
        ])
        .unwrap_err();
        let fields: Vec<_> = err.fields().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["rate", "gpu_model", "effective_from"]);
        assert!(err.fields()[2].message.contains("A100-80GB has two rates effective from 2024-04-16"));
        // Same date, different models: fine.
        assert!(
            RateHistory::new([
                RateVersion::manual("A100-80GB", d("2024-04-16"), rate(dec!(6))),
                RateVersion::manual("H100-80GB", d("2024-04-16"), rate(dec!(9))),
            ])
            .is_ok()
        );
    }

    #[test]
    fn a_mid_month_change_splits_the_month_at_local_midnight() {
        let tz = chrono_tz::Asia::Shanghai;
        let segs = history().segments("A100-80GB", at(tz, "2024-04-01"), at(tz, "2024-05-01"));
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].from.with_timezone(&Utc), utc("2024-03-31T16:00:00Z"));
        assert_eq!(segs[0].to.with_timezone(&Utc), utc("2024-04-15T16:00:00Z"));
        assert_eq!((segs[0].rate, segs[0].effective_from), (Some(rate(dec!(5))), Some(d("2024-01-01"))));
        assert_eq!((segs[1].rate, segs[1].effective_from), (Some(rate(dec!(6))), Some(d("2024-04-16"))));
        assert_eq!(segs[1].to.with_timezone(&Utc), utc("2024-04-30T16:00:00Z"));
        assert_eq!(segs[0].duration(), TimeDelta::days(15));
        assert_eq!(segs[1].duration(), TimeDelta::days(15));
    }

    #[test]
    fn before_the_first_version_is_a_gap_and_unknown_models_are_all_gap() {
        let tz = chrono_tz::UTC;
        let h = history();
        let segs = h.segments("A100-80GB", at(tz, "2023-12-31"), at(tz, "2024-01-02"));
        assert_eq!(segs.len(), 2);
        assert!(segs[0].is_gap() && segs[0].effective_from.is_none());
        assert_eq!(segs[0].duration(), TimeDelta::days(1));
        assert_eq!(segs[1].rate, Some(rate(dec!(5))));
        let unknown = h.segments("B200", at(tz, "2024-01-01"), at(tz, "2024-02-01"));
        assert_eq!(unknown.len(), 1);
        assert!(unknown[0].is_gap());
        assert_eq!(unknown[0].duration(), TimeDelta::days(31));
        assert!(h.segments("A100-80GB", at(tz, "2024-02-01"), at(tz, "2024-02-01")).is_empty());
        assert!(h.segments("A100-80GB", at(tz, "2024-02-02"), at(tz, "2024-02-01")).is_empty());
    }

    #[test]
    fn a_boundary_on_the_period_edges_does_not_make_empty_segments() {
        let tz = chrono_tz::Asia::Shanghai;
        let h = history();
        let segs = h.segments("A100-80GB", at(tz, "2024-04-16"), at(tz, "2024-04-17"));
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].rate, Some(rate(dec!(6))));
        let segs = h.segments("A100-80GB", at(tz, "2024-04-15"), at(tz, "2024-04-16"));
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].rate, Some(rate(dec!(5))));
    }

    #[test]
    fn to_in_another_zone_is_read_in_the_billing_zone() {
        let tz = chrono_tz::Asia::Shanghai;
        let to = at(tz, "2024-05-01").with_timezone(&chrono_tz::America::New_York);
        let segs = history().segments("A100-80GB", at(tz, "2024-04-01"), to);
        assert_eq!(segs[1].to, at(tz, "2024-05-01"));
        assert_eq!(segs[1].to.timezone(), tz);
    }

    #[test]
    fn daylight_saving_months_have_their_real_length() {
        let tz = chrono_tz::America::New_York;
        let h = RateHistory::new([
            RateVersion::manual("A100-80GB", d("2024-01-01"), rate(dec!(5))),
            RateVersion::manual("A100-80GB", d("2024-03-15"), rate(dec!(6))),
        ])
        .unwrap();
        let segs = h.segments("A100-80GB", at(tz, "2024-03-01"), at(tz, "2024-04-01"));
        // 2024-03-10 lost an hour; the cut is at local midnight (EDT, −4) on the 15th.
        assert_eq!(segs[0].duration(), TimeDelta::hours(14 * 24 - 1));
        assert_eq!(segs[1].duration(), TimeDelta::hours(17 * 24));
        assert_eq!(segs[0].to.with_timezone(&Utc), utc("2024-03-15T04:00:00Z"));
    }

    #[test]
    fn skipped_and_repeated_midnights() {
        // Chile moved clocks from 00:00 to 01:00 on 2022-09-11: the day starts at the change.
        let santiago = chrono_tz::America::Santiago;
        assert_eq!(at(santiago, "2022-09-11").with_timezone(&Utc), utc("2022-09-11T04:00:00Z"));
        // Cuba moved clocks from 01:00 back to 00:00 on 2023-11-05: midnight happens twice, the day starts at the first.
        let havana = chrono_tz::America::Havana;
        assert_eq!(at(havana, "2023-11-05").with_timezone(&Utc), utc("2023-11-05T04:00:00Z"));
        // Samoa skipped 2011-12-30 entirely: a version from that day takes effect together with the next day's,
        // and the later one wins without an empty segment between them.
        let apia = chrono_tz::Pacific::Apia;
        assert_eq!(at(apia, "2011-12-30"), at(apia, "2011-12-31"));
        let h = RateHistory::new([
            RateVersion::manual("A100-80GB", d("2011-12-01"), rate(dec!(1))),
            RateVersion::manual("A100-80GB", d("2011-12-30"), rate(dec!(2))),
            RateVersion::manual("A100-80GB", d("2011-12-31"), rate(dec!(3))),
        ])
        .unwrap();
        let segs = h.segments("A100-80GB", at(apia, "2011-12-01"), at(apia, "2012-01-01"));
        let rates: Vec<_> = segs.iter().map(|s| s.rate.unwrap().to_string()).collect();
        assert_eq!(rates, ["1.0000", "3.0000"]);
        assert_eq!(segs.iter().map(RateSegment::duration).sum::<TimeDelta>(), TimeDelta::days(30));
    }

    #[test]
    fn versions_round_trip_through_json() {
        let v = RateVersion::from_tco("A100-80GB", d("2024-01-01"), a100().validate().unwrap());
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["source"]["kind"], "tco");
        assert_eq!(json["source"]["inputs"]["pue"], "1.4");
        assert_eq!(json["rate"], "5.6893");
        assert_eq!(serde_json::from_value::<RateVersion>(json).unwrap(), v);
        let m = RateVersion::manual("L40S", d("2024-01-01"), rate(dec!(2.5)));
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["source"], serde_json::json!({"kind": "manual"}));
        assert_eq!(serde_json::from_value::<RateVersion>(json).unwrap(), m);
    }

    const ZONES: [Tz; 8] = [
        chrono_tz::UTC,
        chrono_tz::Asia::Shanghai,
        chrono_tz::America::New_York,
        chrono_tz::Europe::London,
        chrono_tz::Australia::Lord_Howe,
        chrono_tz::America::Santiago,
        chrono_tz::America::Havana,
        chrono_tz::Pacific::Apia,
    ];

    // Days near clock changes in several of the zones above, so boundaries land on odd days often.
    const ANCHORS: [&str; 6] = ["2011-12-20", "2022-09-01", "2023-10-25", "2024-03-01", "2024-10-20", "2024-01-01"];

    proptest! {
        #[test]
        fn segments_tile_the_period(
            zone in 0usize..ZONES.len(),
            anchor in 0usize..ANCHORS.len(),
            days in proptest::collection::btree_map(0i64..40, 0u32..1000, 0..6),
            from_min in 0i64..40 * 1440,
            to_min in 0i64..40 * 1440,
        ) {
            let tz = ZONES[zone];
            let anchor = d(ANCHORS[anchor]);
            let versions: Vec<_> = days
                .iter()
                .map(|(&day, &r)| RateVersion::manual("M", anchor + TimeDelta::days(day), rate(Decimal::new(r.into(), 2))))
                .collect();
            let h = RateHistory::new(versions.clone()).unwrap();
            let origin = start_of_day(tz, anchor);
            let from = origin + TimeDelta::minutes(from_min);
            let to = origin + TimeDelta::minutes(to_min);
            let segs = h.segments("M", from, to);
            if from >= to {
                prop_assert!(segs.is_empty());
                return Ok(());
            }
            prop_assert_eq!(segs.first().unwrap().from, from);
            prop_assert_eq!(segs.last().unwrap().to, to);
            for pair in segs.windows(2) {
                prop_assert_eq!(pair[0].to, pair[1].from);
            }
            prop_assert!(segs.iter().all(|s| s.from < s.to));
            prop_assert_eq!(segs.iter().map(RateSegment::duration).sum::<TimeDelta>(), to - from);
            // Every boundary inside the period is a cut, and nothing else is.
            let mut inside: Vec<_> = versions
                .iter()
                .map(|v| start_of_day(tz, v.effective_from))
                .filter(|b| from < *b && *b < to)
                .collect();
            inside.dedup();
            let cuts: Vec<_> = segs.iter().skip(1).map(|s| s.from).collect();
            prop_assert_eq!(cuts, inside);
            // Each piece carries the latest version started by its beginning.
            for s in &segs {
                let expected = versions.iter().rfind(|v| start_of_day(tz, v.effective_from) <= s.from);
                prop_assert_eq!(s.rate, expected.map(|v| v.rate));
                prop_assert_eq!(s.effective_from, expected.map(|v| v.effective_from));
            }
        }
    }
}
