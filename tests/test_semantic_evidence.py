"""Stage 4's evidence beyond the cosine: facts of one text in both scripts, and the verdict on a pair."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from newsdedup.config import ConfigError, EvidenceConfig, load_config
from newsdedup.stages.semantic.evidence import REASONS, Facts, facts_of, name_key, refusal

# Sunday 15 February 2026, 10:00 in Dhaka.
SUNDAY = datetime(2026, 2, 15, 4, 0, tzinfo=timezone.utc)
RULES = EvidenceConfig()


def facts(numbers=(), scores=(), days=(), names=()) -> Facts:
    return Facts(frozenset(numbers), frozenset(scores), frozenset(days), frozenset(names))


@pytest.mark.parametrize("english, bangla", [
    ("Tarique", "তারেক"), ("Rahman", "রহমান"), ("Chattogram", "চট্টগ্রাম"), ("Mohammedan", "মোহামেডান"),
    ("Sylhet", "সিলেট"), ("Narayanganj", "নারায়ণগঞ্জ"), ("Rajshahi", "রাজশাহী"), ("chairman", "চেয়ারম্যান"),
    ("Jamaat", "জামায়াত"), ("Gazipur", "গাজীপুর"),
])
def test_a_name_spelled_in_english_and_in_bangla_has_one_key(english, bangla):
    assert name_key(english) == name_key(bangla) != ""


def test_a_word_capitalised_only_because_it_opens_a_sentence_is_no_name():
    f = facts_of("Economists expect more. The governor met Rahman. Rahman said rates would rise.")
    assert f.names == {name_key("Rahman")}


def test_different_names_have_different_keys_and_short_ones_none():
    keys = [name_key(w) for w in ("Abahani", "Mohammedan", "Rahmatganj", "Khulna", "Rangpur", "Rahim")]
    assert len(set(keys)) == len(keys)
    assert name_key("Dhaka") == "" and name_key("ঢাকা") == ""   # two consonants collide by chance


def test_facts_read_dates_weekdays_and_relative_days_against_publication():
    f = facts_of("The verdict came on Saturday; the hearing was held on Feb 2, 2026 and resumes 19 February. "
                 "Police said yesterday that 12 people were hurt.", SUNDAY)
    # Saturday and yesterday are both the 14th; the explicit dates stay as written.
    assert f.days == {"2026-02-14", "2026-02-02", "2026-02-19"}
    assert f.numbers == {"12"}   # day numbers and the year are not quantities
    bn = facts_of("শনিবার ১৪ ফেব্রুয়ারি গতকাল ১২ জন আহত হয়েছেন", SUNDAY)
    assert bn.days == {"2026-02-14"} and bn.numbers == {"12"}
    # Publication late on Saturday UTC is already Sunday in Dhaka: 'today' is the 15th.
    late = datetime(2026, 2, 14, 20, 0, tzinfo=timezone.utc)
    assert facts_of("The meeting is today.", late).days == {"2026-02-15"}
    assert facts_of("The meeting is today.", late, tz="UTC").days == {"2026-02-14"}
    # Without a publication date a weekday stays a weekday, the same in both scripts.
    assert facts_of("on Saturday").days == facts_of("শনিবার").days == {"weekday-5"}


def test_facts_read_scores_and_numbers_in_both_scripts():
    en = facts_of("In the derby Abahani beat Mohammedan 2-1 before 30,000 fans at 5:30pm; the rate rose to 8.50 percent.")
    assert en.scores == {"1-2"} and en.numbers == {"30000", "8.5"}
    bn = facts_of("আবাহনী ২-১ গোলে মোহামেডানকে হারিয়েছে, দর্শক ৩০,০০০")
    assert bn.scores == en.scores and bn.numbers == {"30000"}
    assert {name_key("Abahani"), name_key("Mohammedan")} <= en.names & bn.names
    assert not facts_of("the 2025-26 fiscal year").scores   # four-digit spans are not scores


def test_two_games_on_one_template_are_refused_on_their_scores():
    a = facts_of("Abahani beat Mohammedan 2-1 at the Bangabandhu stadium on Sunday.", SUNDAY)
    b = facts_of("Bashundhara Kings beat Rahmatganj 3-0 at the Bangabandhu stadium on Sunday.", SUNDAY)
    assert refusal(a, b, RULES) == "scores_differ"
    same = facts_of("Premier League: Abahani edge Mohammedan 2-1 on Sunday evening.", SUNDAY)
    assert refusal(a, same, RULES) is None


def test_each_reason_and_the_order_they_are_checked_in():
    names = {"rhmn", "trk", "bnp", "ctgrm", "mhmdn"}
    base = facts(numbers={"12", "300"}, scores={"1-2"}, days={"2026-02-14"}, names=names)
    assert refusal(base, base, RULES) is None
    assert refusal(base, facts(scores={"0-3"}, days={"2026-02-10"}), RULES) == "scores_differ"
    assert refusal(base, facts(days={"2026-02-10"}, numbers={"12"}), RULES) == "dates_differ"
    assert refusal(base, facts(numbers={"7", "40"}, names=names), RULES) == "numbers_differ"
    other_cast = {"ksb", "slt", "jmt", "rngpr", "gjpr"}
    assert refusal(base, facts(names=other_cast), RULES) == "names_differ"
    assert refusal(base, facts(names={"rhmn"}), RULES) == "no_shared_evidence"
    assert refusal(base, facts(names={"rhmn", "trk"}), RULES) is None        # two names in common suffice
    # One text stating what the other omits is no contradiction.
    assert refusal(base, facts(days={"2026-02-14"}), RULES) is None
    assert REASONS == ("scores_differ", "dates_differ", "numbers_differ", "names_differ", "no_shared_evidence")


def test_thresholds_of_the_rules_and_switching_them_off():
    a, b = facts(numbers={"1", "2", "3", "4"}), facts(numbers={"1", "2", "7", "8"})
    assert refusal(a, b, RULES) is None                                        # half of the smaller set
    assert refusal(a, b, EvidenceConfig(numbers=0.75)) == "numbers_differ"
    few = facts(names={"rhmn", "trk", "bnp"}), facts(names={"ksb", "slt", "jmt"})
    assert refusal(*few, EvidenceConfig(require_shared=False)) is None          # 3 names < min_names
    assert refusal(*few, EvidenceConfig(min_names=3, require_shared=False)) == "names_differ"
    assert refusal(facts(scores={"1-2"}), facts(scores={"0-3"}), EvidenceConfig(enabled=False)) is None


def test_the_evidence_section_is_validated():
    assert load_config().semantic.evidence == EvidenceConfig()
    with pytest.raises(ConfigError, match="evidence.timezone"):
        load_config(overrides={"semantic": {"evidence": {"timezone": "Mars/Olympus"}}})
    with pytest.raises(ConfigError, match="evidence.numbers"):
        load_config(overrides={"semantic": {"evidence": {"numbers": 1.5}}})
    with pytest.raises(ConfigError, match="number_guard: unknown key"):
        load_config(overrides={"semantic": {"number_guard": 0.6}})


def test_amounts_in_words_of_scale_meet_across_languages():
    assert facts_of("Tk 10.08 billion was embezzled").numbers == facts_of("১ হাজার ৮ কোটি টাকা আত্মসাৎ").numbers
    assert facts_of("Tk 70 billion").numbers == facts_of("৭ হাজার কোটি টাকা").numbers == {"7e+10"}
    assert facts_of("250,000 people").numbers == facts_of("২ লাখ ৫০ হাজার মানুষ").numbers
    assert facts_of("two killed, five injured").numbers == facts_of("দুই জন নিহত, পাঁচ জন আহত").numbers == {"2", "5"}
    assert facts_of("Tk 5 crore").numbers != facts_of("Tk 5 lakh").numbers


def test_numbers_and_days_are_read_from_the_lead_and_names_from_the_whole_text():
    text = "Minister Rahman spoke on Saturday about 12 projects. " + "x " * 500 + "Then Karim recalled 1999 and 40 " \
        "others on Feb 2."
    lead = facts_of(text, SUNDAY, lead_chars=100)
    assert lead.numbers == {"12"} and lead.days == {"2026-02-14"}
    assert {name_key("Rahman"), name_key("Karim")} <= lead.names
    assert facts_of(text, SUNDAY).numbers == {"12", "40"}


def test_a_weekday_without_a_publication_day_meets_a_date_on_that_weekday():
    undated, dated = facts_of("The rally on Saturday drew 12 leaders."), facts_of("শনিবার সমাবেশে ১২ নেতা", SUNDAY)
    assert undated.days == {"weekday-5"} and dated.days == {"2026-02-14"}
    assert refusal(undated, dated, RULES, same_language=False) is None
    friday = facts_of("The rally on Friday drew 12 leaders.")
    assert refusal(friday, dated, RULES, same_language=False) == "dates_differ"


def test_names_never_contradict_across_languages_but_count_for_a_link():
    en = facts(names={"rhmn", "trk"} | {f"e{i}x" for i in range(10)})    # 2 of 12 names shared: < 0.2
    bn = facts(names={"rhmn", "trk"} | {f"b{i}x" for i in range(40)})
    assert refusal(en, bn, RULES, same_language=True) == "names_differ"
    assert refusal(en, bn, RULES, same_language=False) is None       # two names shared: evidence enough
    assert refusal(facts(names={"rhmn"}), facts(names={"rhmn"}), RULES, same_language=False) == "no_shared_evidence"
    one_each = facts(numbers={"6"}, names={"rhmn", "trk"}), facts(numbers={"2"}, names={"rhmn", "trk"})
    assert refusal(*one_each, RULES) is None                          # one number each: min_numbers 2
