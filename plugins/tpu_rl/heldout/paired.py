"""A paired verdict on held-out items: a candidate and a reference model (the champion, or the
base) scored on the same benchmark items, compared item by item.

The test is McNemar's exact test: only the items the two models disagree on carry evidence, and
under "no difference" each such item is equally likely to favour either, so the count favouring
the candidate is Binomial(discordant, 1/2) (McNemar 1947; Fagerland, Lydersen and Laake 2013,
"The McNemar test for binary matched-pairs data", BMC Med Res Methodol 13:91, the exact
conditional version). The interval of the accuracy difference is the Wald interval for paired
proportions (Agresti, "Categorical Data Analysis", 3rd ed., 10.1.1). Both are a few lines of
arithmetic on four counts: written here (the package does not depend on scipy; the unit tests
check the p-values against scipy.stats.binomtest)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist


class Verdict(StrEnum):
    """What the items show about the candidate against the reference, at the stated level."""

    BETTER = "better"
    WORSE = "worse"
    NOT_DISTINGUISHABLE = "not_distinguishable"


@dataclass(frozen=True)
class PairedCounts:
    """The items by who answered them right: both, the candidate only, the reference only,
    neither."""

    both: int
    candidate_only: int
    reference_only: int
    neither: int

    @classmethod
    def of_items(cls, candidate: Mapping[str, bool], reference: Mapping[str, bool]) -> PairedCounts:
        """The counts of two per-item results (item id -> correct) over the same items; items
        that only one side scored are refused by name, never dropped (unpaired items would make
        the comparison a different question)."""
        if unpaired := sorted(candidate.keys() ^ reference.keys()):
            shown = ", ".join(unpaired[:5]) + (" ..." if len(unpaired) > 5 else "")
            raise ValueError(
                f"{len(unpaired)} item(s) scored for one model only ({shown}): a paired verdict "
                "needs both models scored on the same items"
            )
        if not candidate:
            raise ValueError("no item was scored: a verdict needs at least one item")
        counts = [0, 0, 0, 0]
        for item, right in candidate.items():
            counts[(not right) * 2 + (not reference[item])] += 1
        both, candidate_only, reference_only, neither = counts
        return cls(both, candidate_only, reference_only, neither)

    @property
    def items(self) -> int:
        return self.both + self.candidate_only + self.reference_only + self.neither

    @property
    def discordant(self) -> int:
        return self.candidate_only + self.reference_only

    @property
    def candidate_accuracy(self) -> float:
        return (self.both + self.candidate_only) / self.items

    @property
    def reference_accuracy(self) -> float:
        return (self.both + self.reference_only) / self.items

    @property
    def difference(self) -> float:
        """Candidate's accuracy minus the reference's, as a share of the items."""
        return (self.candidate_only - self.reference_only) / self.items


@dataclass(frozen=True)
class PairedVerdict:
    """The verdict, its evidence and the smallest gain these items could have shown."""

    counts: PairedCounts
    alpha: float
    p_value: float
    interval: tuple[float, float]  # of the accuracy difference, at level 1 - alpha
    verdict: Verdict
    smallest_detectable_gain: float | None  # None: no gain these items hold is significant

    def says(self, reference: str) -> str:
        """One line for a person: the verdict against `reference`, with its figures."""
        c, (low, high) = self.counts, self.interval
        level = f"{(1 - self.alpha) * 100:g}%"
        words = {
            Verdict.BETTER: f"better than {reference}",
            Verdict.WORSE: f"worse than {reference}",
            Verdict.NOT_DISTINGUISHABLE: f"not distinguishable from {reference}",
        }[self.verdict]
        smallest = (
            f"; these items could show a gain of {_points(self.smallest_detectable_gain)} at "
            "the least"
            if self.smallest_detectable_gain is not None
            else "; no gain these items hold could be shown"
        )
        return (
            f"{words}: {c.candidate_accuracy:.1%} vs {c.reference_accuracy:.1%} on {c.items} "
            f"items ({_points(c.difference, signed=True)}, {level} interval "
            f"{low * 100:+.1f} to {_points(high, signed=True)}; McNemar exact "
            f"p={self.p_value:.3g}, {c.candidate_only} item(s) only it answered right, "
            f"{c.reference_only} only {reference}{smallest})"
        )


def mcnemar_exact_p(candidate_only: int, reference_only: int) -> float:
    """The two-sided exact p-value: twice the smaller binomial tail of the discordant items
    (1 when they split evenly or there are none)."""
    discordant = candidate_only + reference_only
    tail = sum(math.comb(discordant, k) for k in range(min(candidate_only, reference_only) + 1))
    return min(1.0, 2 * tail / (1 << discordant))


def difference_interval(counts: PairedCounts, alpha: float) -> tuple[float, float]:
    """The Wald interval of the paired accuracy difference at level 1 - alpha, clipped to
    [-1, 1]: d +- z * sqrt(b + c - (b - c)^2 / n) / n."""
    b, c, n = counts.candidate_only, counts.reference_only, counts.items
    z = NormalDist().inv_cdf(1 - alpha / 2)
    half = z * math.sqrt(max(b + c - (b - c) ** 2 / n, 0.0)) / n
    return max(-1.0, counts.difference - half), min(1.0, counts.difference + half)


def smallest_detectable_gain(items: int, discordant: int, alpha: float) -> float | None:
    """The smallest accuracy gain McNemar's exact test calls significant at `alpha` on `items`
    items of which `discordant` are answered right by one model only; None when even all of
    them favouring the candidate would not be."""
    for lead in range(discordant % 2, discordant + 1, 2):  # candidate_only - reference_only
        if mcnemar_exact_p((discordant + lead) // 2, (discordant - lead) // 2) < alpha:
            return lead / items
    return None


def paired_verdict(
    candidate: Mapping[str, bool], reference: Mapping[str, bool], alpha: float
) -> PairedVerdict:
    """Candidate against reference on the same items (item id -> answered right)."""
    return verdict_of_counts(PairedCounts.of_items(candidate, reference), alpha)


def verdict_of_counts(counts: PairedCounts, alpha: float) -> PairedVerdict:
    """The verdict of four counts (all it depends on: a verdict kept as counts is rebuilt)."""
    if not 0 < alpha < 1:
        raise ValueError(f"the significance level must be between 0 and 1, not {alpha}")
    p = mcnemar_exact_p(counts.candidate_only, counts.reference_only)
    verdict = Verdict.NOT_DISTINGUISHABLE
    if p < alpha:
        verdict = Verdict.BETTER if counts.difference > 0 else Verdict.WORSE
    return PairedVerdict(
        counts=counts,
        alpha=alpha,
        p_value=p,
        interval=difference_interval(counts, alpha),
        verdict=verdict,
        smallest_detectable_gain=smallest_detectable_gain(counts.items, counts.discordant, alpha),
    )


def _points(share: float | None, signed: bool = False) -> str:
    """A share of the items as accuracy points: 0.013 -> '1.3 points' ('+1.3 points')."""
    return f"{(share or 0) * 100:{'+' if signed else ''}.1f} points"
