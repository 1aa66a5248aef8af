"""Article text for the synthetic corpus: vocabulary, entity pools and templates (English and Bangla).

`render(plan_seed, entities, lang, sports)` turns a story plan into a title and
paragraphs; the same plan with other entities gives a templated hard negative.
"""

from __future__ import annotations

import random
import re
from typing import Mapping

# --------------------------------------------------------------------------- vocabulary

EN = {
    "first": "Rahim Karim Nasrin Farhana Tanvir Sabbir Mahmud Shakib Tamim Mushfiq Liton Taskin Rubel Nusrat Sadia "
             "Arif Imran Kamal Jamal Shirin Rumana Fahim Rakib Jewel Topu Anisul Habib Selina Dipu Monir".split(),
    "last": "Hossain Rahman Ahmed Islam Chowdhury Khan Uddin Akter Sarkar Mia Talukder Bhuiyan Haque Alam Karim "
            "Sultana Begum Das Roy Barua Saha Molla Sheikh Siddique Kabir".split(),
    "place": "Dhaka Chattogram Sylhet Khulna Rajshahi Barishal Rangpur Mymensingh Cumilla Gazipur Narayanganj Bogura "
             "Jessore Dinajpur Tangail Faridpur Noakhali Cox's-Bazar Sunamganj Pabna Kushtia Jamalpur Feni Bhola "
             "Satkhira Habiganj Moulvibazar Netrokona Sirajganj Chandpur".split(),
    "org": ["Bangladesh Bank", "the Election Commission", "the Dhaka North City Corporation", "BRAC",
            "the Water Development Board", "the health directorate", "the Anti-Corruption Commission",
            "the Roads and Highways Department", "the education board", "Dhaka WASA", "the BGMEA",
            "the Meteorological Department", "the power division", "the Supreme Court", "the planning commission",
            "the Bangladesh Cricket Board", "the football federation", "the Chittagong Port Authority"],
    "team": ["Abahani", "Mohammedan", "Bashundhara Kings", "Sheikh Russel", "Fortis FC", "Dhaka Dynamites",
             "Comilla Victorians", "Rangpur Riders", "Sylhet Strikers", "Khulna Tigers", "Chattogram Challengers",
             "Barishal Bulls", "Rahmatganj", "Brothers Union", "Police FC", "Arambagh", "Muktijoddha", "Uttara FC"],
    "day": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "noun": "budget plan project report inquiry protest shortage price market road bridge school hospital election "
            "vote policy tax loan factory worker farmer flood storm river crop rice fuel power supply demand deal "
            "court case trial verdict ministry committee board council meeting campaign programme survey audit "
            "scheme contract tender railway bus train port ship garment export import salary pension clinic vaccine "
            "drive reform".split(),
    "adj": "new major local national rural urban official final public private early late sharp steady sudden "
           "severe modest fresh formal partial full critical long short rising falling record weekly annual "
           "special joint interim wider".split(),
    "verb": "approved rejected delayed announced expanded reviewed suspended launched completed questioned "
            "criticised welcomed extended cancelled postponed funded opened closed raised cut".split(),
}

BN = {
    "first": "রহিম করিম নাসরিন ফারহানা তানভীর সাব্বির মাহমুদ সাকিব তামিম মুশফিক লিটন তাসকিন রুবেল নুসরাত সাদিয়া "
             "আরিফ ইমরান কামাল জামাল শিরিন রুমানা ফাহিম রাকিব জুয়েল সেলিনা মনির হাবিব দীপু".split(),
    "last": "হোসেন রহমান আহমেদ ইসলাম চৌধুরী খান উদ্দিন আক্তার সরকার মিয়া তালুকদার ভূঁইয়া হক আলম কবির "
            "বেগম দাস রায় বড়ুয়া সাহা মোল্লা শেখ সিদ্দিকী".split(),
    "place": "ঢাকা চট্টগ্রাম সিলেট খুলনা রাজশাহী বরিশাল রংপুর ময়মনসিংহ কুমিল্লা গাজীপুর নারায়ণগঞ্জ বগুড়া "
             "যশোর দিনাজপুর টাঙ্গাইল ফরিদপুর নোয়াখালী কক্সবাজার সুনামগঞ্জ পাবনা কুষ্টিয়া জামালপুর ফেনী ভোলা "
             "সাতক্ষীরা হবিগঞ্জ মৌলভীবাজার নেত্রকোনা সিরাজগঞ্জ চাঁদপুর".split(),
    "org": ["বাংলাদেশ ব্যাংক", "নির্বাচন কমিশন", "ঢাকা উত্তর সিটি করপোরেশন", "পানি উন্নয়ন বোর্ড",
            "স্বাস্থ্য অধিদপ্তর", "দুর্নীতি দমন কমিশন", "সড়ক ও জনপথ অধিদপ্তর", "শিক্ষা বোর্ড", "ঢাকা ওয়াসা",
            "আবহাওয়া অধিদপ্তর", "বিদ্যুৎ বিভাগ", "সুপ্রিম কোর্ট", "পরিকল্পনা কমিশন", "বাংলাদেশ ক্রিকেট বোর্ড",
            "ফুটবল ফেডারেশন", "চট্টগ্রাম বন্দর কর্তৃপক্ষ"],
    "team": ["আবাহনী", "মোহামেডান", "বসুন্ধরা কিংস", "শেখ রাসেল", "ফর্টিস", "ঢাকা ডায়নামাইটস", "কুমিল্লা ভিক্টোরিয়ান্স",
             "রংপুর রাইডার্স", "সিলেট স্ট্রাইকার্স", "খুলনা টাইগার্স", "চট্টগ্রাম চ্যালেঞ্জার্স", "বরিশাল বুলস",
             "রহমতগঞ্জ", "ব্রাদার্স ইউনিয়ন", "পুলিশ এফসি", "আরামবাগ"],
    "day": "সোমবার মঙ্গলবার বুধবার বৃহস্পতিবার শুক্রবার শনিবার রোববার".split(),
    "noun": "বাজেট পরিকল্পনা প্রকল্প প্রতিবেদন তদন্ত বিক্ষোভ সংকট দাম বাজার সড়ক সেতু বিদ্যালয় হাসপাতাল নির্বাচন "
            "ভোট নীতি কর ঋণ কারখানা শ্রমিক কৃষক বন্যা ঝড় নদী ফসল চাল জ্বালানি বিদ্যুৎ সরবরাহ চাহিদা চুক্তি "
            "আদালত মামলা বিচার রায় মন্ত্রণালয় কমিটি বোর্ড সভা প্রচারণা কর্মসূচি জরিপ নিরীক্ষা রেলপথ বাস ট্রেন "
            "বন্দর জাহাজ পোশাক রপ্তানি আমদানি বেতন ভাতা টিকা সংস্কার".split(),
    "adj": "নতুন বড় স্থানীয় জাতীয় গ্রামীণ শহুরে সরকারি চূড়ান্ত বেসরকারি প্রাথমিক দীর্ঘ স্বল্প তীব্র হঠাৎ "
           "বিশেষ যৌথ অন্তর্বর্তী বার্ষিক সাপ্তাহিক ব্যাপক নজিরবিহীন জরুরি আংশিক পূর্ণাঙ্গ".split(),
    "verb": "অনুমোদন বাতিল স্থগিত ঘোষণা সম্প্রসারণ পর্যালোচনা উদ্বোধন সমাপ্ত সমালোচনা স্বাগত বৃদ্ধি হ্রাস".split(),
}

# Phrase pools. Slots: {PE1} {PE2} people, {PL} place, {OR} organisation, {T1} {T2} teams,
# {S1} {S2} scores, {NUM} a number, {DAY} weekday (entities of the item); {n} {a} {v}
# generic noun/adjective/verb drawn per occurrence from the plan.
EN_POOLS = {
    "head": ["{OR} {v} {a} {n} in {PL}", "{PE1} says {a} {n} will go ahead", "{NUM} hurt as {n} turns violent in {PL}",
             "{PL} {n}: {OR} orders {a} inquiry", "{OR} to review {n} after {a} {n} row"],
    "sports_head": ["{T1} beat {T2} {S1}-{S2} in {PL}", "{T1} hold {T2} to {S1}-{S2} draw",
                    "{PE1} stars as {T1} edge {T2} {S1}-{S2}", "{T2} stunned {S2}-{S1} by {T1} at {PL}"],
    "subj": ["{PE1}", "{PE2}", "Officials in {PL}", "A spokesman for {OR}", "Residents of {PL}", "The minister",
             "Police in {PL}", "Analysts", "Local leaders", "{PE1}, who heads {OR},", "Witnesses", "The committee",
             "Business owners in {PL}", "Opposition lawmakers", "Experts at {OR}", "The {a} {n} panel",
             "Teachers in {PL}", "Doctors at the {a} hospital", "Farmers near {PL}", "Economists"],
    "pred": ["said the {a} {n} would be {v} by the end of the month",
             "told reporters that the {n} had been {v} after {a} complaints",
             "warned that the {a} {n} could hit {NUM} families", "confirmed that {NUM} people had been affected",
             "denied that the {n} was {v} for political reasons", "called for a {a} review of the {n}",
             "said {OR} had {v} the {n} without consultation", "expected the {n} to be {v} soon",
             "described the {a} {n} as a turning point for {PL}", "urged {OR} to publish the {n} in full",
             "said the cost of the {n} had risen to {NUM} crore taka", "argued that the {a} {n} was long overdue",
             "noted that a {a} {n} was {v} last year", "questioned why the {n} had been {v} twice",
             "said talks on the {n} would resume on {DAY}", "insisted the {a} {n} was safe",
             "said more than {NUM} workers had joined the {n}", "blamed the {a} {n} on poor planning",
             "welcomed the decision but said the {n} was only a first step",
             "estimated that the {a} {n} would take {NUM} days to complete"],
    "adv": ["on {DAY}", "in a statement", "at a press briefing in {PL}", "late on {DAY}", "earlier this week",
            "after a meeting with {PE2}", "according to local media", "in an interview", "without giving details",
            "as the {n} continued", ""],
    "sports_pred": ["said {T1} had deserved the win over {T2}", "praised {PE2} for the goal that sealed the {S1}-{S2} result",
                    "said {T2} had struggled after the {a} start", "admitted the {S1}-{S2} scoreline flattered {T1}",
                    "said the {a} crowd in {PL} had lifted the players", "said {T2} would recover before the next {n}",
                    "criticised the referee for a {a} decision in the second half",
                    "said {T1} now sit {NUM} points clear at the top of the table"],
    "update": ["Update: {OR} said on {DAY} that the {n} would be {v}.",
               "This story has been updated with comments from {PE2}.",
               "Later, {PE1} said a {a} {n} would be announced in {PL}."],
}

BN_POOLS = {
    "head": ["{PL}-এ {a} {n} {v} করল {OR}", "{a} {n} হবেই: {PE1}", "{PL}-এ {n} ঘিরে সংঘর্ষ, আহত {NUM}",
             "{n} নিয়ে {a} তদন্তের নির্দেশ {OR}-এর", "{OR}-এর {n} নিয়ে বিতর্ক"],
    "sports_head": ["{T2}কে {S1}-{S2} গোলে হারাল {T1}", "{T1}-{T2} ম্যাচ {S1}-{S2} গোলে ড্র",
                    "{PE1}-এর নৈপুণ্যে {T1}-এর জয়", "{PL}-এ {T1}-এর কাছে {S2}-{S1} গোলে হার {T2}-এর"],
    "subj": ["{PE1}", "{PE2}", "{PL} জেলা প্রশাসনের কর্মকর্তারা", "{OR}-এর একজন মুখপাত্র", "{PL}-এর বাসিন্দারা",
             "মন্ত্রী", "{PL} থানার পুলিশ", "বিশ্লেষকেরা", "স্থানীয় নেতারা", "{OR}-এর প্রধান {PE1}", "প্রত্যক্ষদর্শীরা",
             "কমিটির সদস্যরা", "{PL}-এর ব্যবসায়ীরা", "বিরোধী দলের সংসদ সদস্যরা", "{OR}-এর বিশেষজ্ঞরা",
             "{a} {n} কমিটি", "{PL}-এর শিক্ষকেরা", "হাসপাতালের চিকিৎসকেরা", "{PL}-এর কৃষকেরা", "অর্থনীতিবিদেরা"],
    "adv": ["{DAY}", "এক বিবৃতিতে", "{PL}-এ এক সংবাদ সম্মেলনে", "{DAY} রাতে", "চলতি সপ্তাহের শুরুতে",
            "{PE2}-এর সঙ্গে বৈঠকের পর", "স্থানীয় গণমাধ্যমকে", "এক সাক্ষাৎকারে", "বিস্তারিত না জানিয়ে", ""],
    "pred": ["বলেছেন, মাসের শেষে {a} {n} {v} করা হবে", "জানিয়েছেন, {a} অভিযোগের পর {n} {v} করা হয়েছে",
             "সতর্ক করেছেন, {a} {n} {NUM}টি পরিবারকে ক্ষতিগ্রস্ত করতে পারে", "নিশ্চিত করেছেন, {NUM} জন মানুষ ক্ষতিগ্রস্ত হয়েছেন",
             "রাজনৈতিক কারণে {n} {v} করার অভিযোগ অস্বীকার করেছেন", "{n} নিয়ে {a} পর্যালোচনার দাবি জানিয়েছেন",
             "বলেছেন, আলোচনা ছাড়াই {OR} {n} {v} করেছে", "আশা করছেন, শিগগিরই {n} {v} করা হবে",
             "{a} {n}কে {PL}-এর জন্য মোড় ঘোরানো ঘটনা বলে বর্ণনা করেছেন", "{OR}কে পুরো {n} প্রকাশের আহ্বান জানিয়েছেন",
             "বলেছেন, {n}-এর ব্যয় বেড়ে {NUM} কোটি টাকা হয়েছে", "মনে করেন, {a} {n} অনেক আগেই দরকার ছিল",
             "উল্লেখ করেছেন, গত বছর একটি {a} {n} {v} করা হয়েছিল", "প্রশ্ন তুলেছেন, কেন দুবার {n} {v} করা হলো",
             "জানিয়েছেন, {DAY} আবার {n} নিয়ে আলোচনা শুরু হবে", "দাবি করেছেন, {a} {n} নিরাপদ",
             "বলেছেন, {NUM} জনের বেশি শ্রমিক {n}-এ যোগ দিয়েছেন", "দুর্বল পরিকল্পনাকে {a} {n}-এর জন্য দায়ী করেছেন",
             "সিদ্ধান্তকে স্বাগত জানিয়ে বলেছেন, {n} কেবল প্রথম পদক্ষেপ", "ধারণা দিয়েছেন, {a} {n} শেষ হতে {NUM} দিন লাগবে"],
    "sports_pred": ["বলেছেন, {T2}-এর বিপক্ষে জয়টা {T1}-এর প্রাপ্য ছিল", "{S1}-{S2} ব্যবধান নিশ্চিত করা গোলের জন্য {PE2}-এর প্রশংসা করেছেন",
                    "বলেছেন, {a} শুরুর পর {T2} খেই হারিয়ে ফেলে", "স্বীকার করেছেন, {S1}-{S2} ফল {T1}-এর পক্ষে একটু বেশিই গেছে",
                    "বলেছেন, {PL}-এর {a} দর্শক খেলোয়াড়দের উজ্জীবিত করেছেন", "বলেছেন, পরের {n}-এর আগে {T2} ঘুরে দাঁড়াবে",
                    "দ্বিতীয়ার্ধের একটি {a} সিদ্ধান্তের জন্য রেফারির সমালোচনা করেছেন",
                    "বলেছেন, {T1} এখন তালিকার শীর্ষে {NUM} পয়েন্টে এগিয়ে"],
    "update": ["হালনাগাদ: {DAY} {OR} জানিয়েছে, {n} {v} করা হবে।", "{PE2}-এর বক্তব্য যোগ করে প্রতিবেদনটি হালনাগাদ করা হয়েছে।",
               "পরে {PE1} জানান, {PL}-এ একটি {a} {n} ঘোষণা করা হবে।"],
}

_SLOT = re.compile(r"\{(\w+)\}")


def _compile(template: str) -> tuple:
    """Split a template into literal strings and slot names (odd positions are slots)."""
    return tuple(_SLOT.split(template))


def _compile_pools(pools: Mapping[str, list[str]]) -> dict[str, tuple]:
    return {k: tuple(_compile(t) for t in v) for k, v in pools.items()}


_POOLS = {"en": _compile_pools(EN_POOLS), "bn": _compile_pools(BN_POOLS)}
_VOCAB = {"en": EN, "bn": BN}
_GENERIC = ("n", "a", "v")


def entities(rng: random.Random, lang: str) -> dict[str, str]:
    """The facts of one item: people, place, organisation, teams, score, a number, a day."""
    v = _VOCAB[lang]
    t1, t2 = rng.sample(v["team"], 2)
    ent = {"PE1": f"{rng.choice(v['first'])} {rng.choice(v['last'])}",
           "PE2": f"{rng.choice(v['first'])} {rng.choice(v['last'])}",
           "PL": rng.choice(v["place"]), "OR": rng.choice(v["org"]), "T1": t1, "T2": t2,
           "S1": str(rng.randint(1, 5)), "S2": str(rng.randint(0, 4)), "NUM": str(rng.randint(3, 950)),
           "DAY": rng.choice(v["day"])}
    if lang == "bn":
        ent = {k: (to_bangla_digits(x) if k in ("S1", "S2", "NUM") else x) for k, x in ent.items()}
    return ent


_BN_DIGITS = str.maketrans("0123456789", "০১২৩৪৫৬৭৮৯")


def to_bangla_digits(s: str) -> str:
    return s.translate(_BN_DIGITS)


_GENERIC_LIST = {"n": "noun", "a": "adj", "v": "verb"}


def _fill(parts: tuple, ent: Mapping[str, str], vocab: Mapping[str, list[str]], rng: random.Random) -> str:
    out = []
    rnd = rng.random
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(part)
        elif part in _GENERIC:
            words = vocab[_GENERIC_LIST[part]]
            out.append(words[int(rnd() * len(words))])
        else:
            out.append(ent[part])
    return "".join(out)


def render(plan_seed: int, ent: Mapping[str, str], lang: str, sports: bool) -> tuple[str, str]:
    """(title, body) of an article: the plan seed fixes structure and generic words, ent the facts."""
    rng = random.Random(plan_seed)
    pools, vocab = _POOLS[lang], _VOCAB[lang]
    title = _fill(rng.choice(pools["sports_head" if sports else "head"]), ent, vocab, rng)
    title = title[0].upper() + title[1:]
    n_sent = rng.randint(14, 24)
    sentences = []
    for _ in range(n_sent):
        pred_pool = pools["sports_pred"] if sports and rng.random() < 0.4 else pools["pred"]
        subj = _fill(rng.choice(pools["subj"]), ent, vocab, rng)
        pred = _fill(rng.choice(pred_pool), ent, vocab, rng)
        adv = _fill(rng.choice(pools["adv"]), ent, vocab, rng)
        if lang == "en":
            s = f"{subj} {pred} {adv}".rstrip() + "."
        else:
            s = f"{subj} {adv} {pred}।".replace("  ", " ")
        sentences.append(s[0].upper() + s[1:] if lang == "en" else s)
    # Paragraphs of 3-5 sentences.
    paras, i = [], 0
    while i < len(sentences):
        k = rng.randint(3, 5)
        paras.append(" ".join(sentences[i:i + k]))
        i += k
    return title, "\n\n".join(paras)


def update_sentences(lang: str, ent: Mapping[str, str], rng: random.Random, n: int) -> str:
    """n sentences of a follow-up ("Police later said ...") about the same entities."""
    pools, vocab = _POOLS[lang], _VOCAB[lang]
    return " ".join(_fill(rng.choice(pools["update"]), ent, vocab, rng) for _ in range(n))
