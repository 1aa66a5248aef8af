"""Build samples/semantic_pairs.jsonl: labelled pairs for `newsdedup calibrate`.

No public labelled set of English/Bangla same-event news pairs was reachable
offline, so these were written for this project. Each event (the facts: who,
what, numbers, place, day) is written up by hand-written "outlets" that word it
differently (different structure, order and vocabulary), in English and in
Bangla. Pairs:

  same_event      label 1  one event, two outlets (en-en, bn-bn, en-bn)
  same_template   label 0  two events of one kind, the same outlet's wording
                           (the hard negative: only names and numbers differ)
  same_topic      label 0  two events of one kind, two outlets

Run: python samples/build_semantic_pairs.py
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# ------------------------------------------------------------------ events (the facts)

FOOTBALL = [
    dict(home="Abahani", away="Mohammedan", hg=2, ag=1, scorer="Rakib Hossain", venue="Bangabandhu National Stadium",
         day="Sunday", bhome="আবাহনী", baway="মোহামেডান", bscorer="রাকিব হোসেন", bvenue="বঙ্গবন্ধু জাতীয় স্টেডিয়ামে",
         bday="রোববার"),
    dict(home="Bashundhara Kings", away="Sheikh Russel", hg=3, ag=0, scorer="Dorielton", venue="Kings Arena",
         day="Tuesday", bhome="বসুন্ধরা কিংস", baway="শেখ রাসেল", bscorer="দরিয়েলতন", bvenue="কিংস অ্যারেনায়",
         bday="মঙ্গলবার"),
    dict(home="Fortis FC", away="Brothers Union", hg=1, ag=1, scorer="Pinku", venue="Sylhet District Stadium",
         day="Friday", bhome="ফর্টিস", baway="ব্রাদার্স ইউনিয়ন", bscorer="পিঙ্কু", bvenue="সিলেট জেলা স্টেডিয়ামে",
         bday="শুক্রবার"),
    dict(home="Police FC", away="Rahmatganj", hg=4, ag=2, scorer="Emeka", venue="Cumilla Stadium",
         day="Saturday", bhome="পুলিশ এফসি", baway="রহমতগঞ্জ", bscorer="এমেকা", bvenue="কুমিল্লা স্টেডিয়ামে",
         bday="শনিবার"),
    dict(home="Mohammedan", away="Fortis FC", hg=0, ag=2, scorer="Sumon Reza", venue="Bangabandhu National Stadium",
         day="Wednesday", bhome="মোহামেডান", baway="ফর্টিস", bscorer="সুমন রেজা", bvenue="বঙ্গবন্ধু জাতীয় স্টেডিয়ামে",
         bday="বুধবার"),
]

FIRE = [
    dict(place="Ashulia", kind="garment factory", dead=6, hurt=20, units=11, hours=4, day="Monday",
         bplace="আশুলিয়ায়", bkind="পোশাক কারখানায়", bday="সোমবার"),
    dict(place="Chawkbazar", kind="chemical warehouse", dead=3, hurt=9, units=15, hours=6, day="Thursday",
         bplace="চকবাজারে", bkind="রাসায়নিকের গুদামে", bday="বৃহস্পতিবার"),
    dict(place="Tongi", kind="plastic factory", dead=0, hurt=4, units=8, hours=3, day="Saturday",
         bplace="টঙ্গীতে", bkind="প্লাস্টিক কারখানায়", bday="শনিবার"),
    dict(place="Sitakunda", kind="container depot", dead=9, hurt=45, units=19, hours=12, day="Sunday",
         bplace="সীতাকুণ্ডে", bkind="কনটেইনার ডিপোতে", bday="রোববার"),
]

RATE = [
    dict(old=8.0, new=8.5, bps=50, infl=9.7, day="Monday", bday="সোমবার"),
    dict(old=8.5, new=9.0, bps=50, infl=9.9, day="Thursday", bday="বৃহস্পতিবার"),
    dict(old=9.0, new=9.5, bps=50, infl=10.1, day="Sunday", bday="রোববার"),
    dict(old=9.5, new=10.0, bps=50, infl=9.3, day="Tuesday", bday="মঙ্গলবার"),
]

ACCIDENT = [
    dict(place="Faridpur", road="Dhaka-Khulna highway", dead=5, vehicles="a bus and a truck", day="Friday",
         bplace="ফরিদপুরে", broad="ঢাকা-খুলনা মহাসড়কে", bvehicles="বাস ও ট্রাকের", bday="শুক্রবার"),
    dict(place="Cumilla", road="Dhaka-Chattogram highway", dead=3, vehicles="a microbus and a lorry", day="Sunday",
         bplace="কুমিল্লায়", broad="ঢাকা-চট্টগ্রাম মহাসড়কে", bvehicles="মাইক্রোবাস ও লরির", bday="রোববার"),
    dict(place="Gopalganj", road="Dhaka-Barishal highway", dead=7, vehicles="two buses", day="Wednesday",
         bplace="গোপালগঞ্জে", broad="ঢাকা-বরিশাল মহাসড়কে", bvehicles="দুটি বাসের", bday="বুধবার"),
    dict(place="Tangail", road="Dhaka-Tangail highway", dead=2, vehicles="a CNG auto-rickshaw and a pickup van",
         day="Tuesday", bplace="টাঙ্গাইলে", broad="ঢাকা-টাঙ্গাইল মহাসড়কে", bvehicles="সিএনজি অটোরিকশা ও পিকআপ ভ্যানের",
         bday="মঙ্গলবার"),
]

# ------------------------------------------------------------------ outlets (the wordings)

def football_en_a(e):
    return (f"{e['home']} {e['hg']}-{e['ag']} {e['away']}",
            f"{e['home']} and {e['away']} met at the {e['venue']} on {e['day']} in the Premier League, and the "
            f"match ended {e['hg']}-{e['ag']}. {e['scorer']} was on the scoresheet. The result leaves both sides "
            f"with plenty to think about ahead of the next round.")


def football_en_b(e):
    verdict = "shared the points with" if e["hg"] == e["ag"] else ("beat" if e["hg"] > e["ag"] else "lost to")
    return (f"Premier League: {e['home']} {verdict} {e['away']}",
            f"A goal from {e['scorer']} proved important as {e['home']} {verdict} {e['away']} "
            f"{e['hg']}-{e['ag']} on {e['day']} evening. Supporters filled the stands of the {e['venue']}, and "
            f"the coaches of both clubs told reporters afterwards that the title race was far from over.")


def football_bn_a(e):
    return (f"{e['bhome']} {e['hg']}-{e['ag']} {e['baway']}",
            f"{e['bday']} {e['bvenue']} প্রিমিয়ার লিগের ম্যাচে {e['bhome']} ও {e['baway']} মুখোমুখি হয়। "
            f"খেলা শেষ হয় {e['hg']}-{e['ag']} গোলে। গোল করেন {e['bscorer']}।")


def football_bn_b(e):
    return (f"প্রিমিয়ার লিগে {e['bhome']}-{e['baway']} লড়াই",
            f"{e['bscorer']}-এর গোলে জমে ওঠা ম্যাচে {e['bhome']} ও {e['baway']}-এর খেলার ফল {e['hg']}-{e['ag']}। "
            f"{e['bday']} সন্ধ্যায় গ্যালারিভর্তি দর্শকের সামনে খেলা হয়, ম্যাচ শেষে দুই দলের কোচই বলেন শিরোপার লড়াই এখনো খোলা।")


def fire_en_a(e):
    toll = f"killing {e['dead']} people" if e["dead"] else "with no deaths reported"
    return (f"Fire at {e['kind']} in {e['place']}",
            f"A fire broke out at a {e['kind']} in {e['place']} on {e['day']}, {toll} and injuring {e['hurt']}. "
            f"{e['units']} fire service units brought it under control after {e['hours']} hours. The cause is "
            f"being investigated.")


def fire_en_b(e):
    toll = f"{e['dead']} dead" if e["dead"] else "no one killed"
    return (f"{e['place']} blaze: {toll}, {e['hurt']} hurt",
            f"Firefighters battled for {e['hours']} hours to douse the flames that engulfed a {e['kind']} in "
            f"{e['place']} on {e['day']}. Officials said {e['hurt']} people were taken to hospital; {toll} was "
            f"the count by evening. {e['units']} units were deployed, and a probe committee has been formed.")


def fire_bn_a(e):
    toll = f"{e['dead']} জন নিহত" if e["dead"] else "কেউ নিহত হননি"
    return (f"{e['bplace']} {e['bkind']} আগুন, {toll}",
            f"{e['bday']} {e['bplace']} একটি {e['bkind']} আগুন লাগে। এতে {toll}, আহত হয়েছেন {e['hurt']} জন। "
            f"ফায়ার সার্ভিসের {e['units']}টি ইউনিট {e['hours']} ঘণ্টার চেষ্টায় আগুন নিয়ন্ত্রণে আনে।")


def fire_bn_b(e):
    toll = f"{e['dead']} জনের মৃত্যু" if e["dead"] else "কোনো প্রাণহানি হয়নি"
    return (f"{e['hours']} ঘণ্টা পর নিয়ন্ত্রণে {e['bplace']} আগুন",
            f"ফায়ার সার্ভিসের {e['units']}টি ইউনিটের কর্মীরা টানা {e['hours']} ঘণ্টা কাজ করে {e['bplace']} "
            f"{e['bkind']} লাগা আগুন নেভান। কর্মকর্তারা জানান, {toll}; {e['hurt']} জনকে হাসপাতালে নেওয়া হয়েছে। "
            f"আগুনের কারণ খুঁজতে তদন্ত কমিটি গঠন করা হয়েছে।")


def rate_en_a(e):
    return (f"Bangladesh Bank raises policy rate to {e['new']}%",
            f"Bangladesh Bank on {e['day']} raised its policy rate by {e['bps']} basis points to {e['new']} percent "
            f"from {e['old']} percent, as inflation stood at {e['infl']} percent. The central bank said it would "
            f"keep tightening until prices eased.")


def rate_en_b(e):
    return (f"Policy rate hiked again as inflation hits {e['infl']}%",
            f"Borrowing will get costlier: the central bank lifted the repo rate to {e['new']} percent on {e['day']}, "
            f"up from {e['old']} percent. With inflation at {e['infl']} percent, the governor said the monetary "
            f"policy committee saw no room to pause, while business leaders warned of pressure on small firms.")


def rate_bn_a(e):
    return (f"নীতি সুদহার বেড়ে {e['new']} শতাংশ",
            f"{e['bday']} বাংলাদেশ ব্যাংক নীতি সুদহার {e['bps']} বেসিস পয়েন্ট বাড়িয়ে {e['old']} শতাংশ থেকে "
            f"{e['new']} শতাংশ করেছে। মূল্যস্ফীতি এখন {e['infl']} শতাংশ।")


def rate_bn_b(e):
    return (f"মূল্যস্ফীতি {e['infl']} শতাংশে, আবার বাড়ল সুদহার",
            f"ঋণের খরচ আরও বাড়বে: কেন্দ্রীয় ব্যাংক রেপো হার {e['old']} থেকে বাড়িয়ে {e['new']} শতাংশ নির্ধারণ করেছে। "
            f"গভর্নর বলেন, মূল্যস্ফীতি {e['infl']} শতাংশে থাকায় থামার সুযোগ নেই; ব্যবসায়ীরা ছোট প্রতিষ্ঠানের চাপের কথা বলেছেন।")


def accident_en_a(e):
    return (f"{e['dead']} killed in {e['place']} road crash",
            f"{e['dead']} people were killed when {e['vehicles']} collided on the {e['road']} in {e['place']} on "
            f"{e['day']} morning, police said. Traffic on the highway was halted for two hours.")


def accident_en_b(e):
    return (f"Head-on collision on {e['road']} leaves {e['dead']} dead",
            f"A head-on collision between {e['vehicles']} claimed {e['dead']} lives in {e['place']} on {e['day']}. "
            f"Witnesses said one of the vehicles was overtaking at speed. Highway police recovered the bodies "
            f"and a case has been filed.")


def accident_bn_a(e):
    return (f"{e['bplace']} সড়ক দুর্ঘটনায় নিহত {e['dead']}",
            f"{e['bday']} সকালে {e['bplace']} {e['broad']} {e['bvehicles']} সংঘর্ষে {e['dead']} জন নিহত হয়েছেন বলে "
            f"পুলিশ জানিয়েছে। দুর্ঘটনার পর দুই ঘণ্টা যান চলাচল বন্ধ ছিল।")


def accident_bn_b(e):
    return (f"{e['broad']} মুখোমুখি সংঘর্ষ, প্রাণ গেল {e['dead']} জনের",
            f"{e['bplace']} {e['bvehicles']} মুখোমুখি সংঘর্ষে {e['dead']} জনের প্রাণ গেছে। প্রত্যক্ষদর্শীরা জানান, "
            f"একটি গাড়ি দ্রুতগতিতে ওভারটেক করছিল। হাইওয়ে পুলিশ লাশ উদ্ধার করেছে, মামলা হয়েছে।")


DOMAINS = {
    "football": (FOOTBALL, football_en_a, football_en_b, football_bn_a, football_bn_b),
    "fire": (FIRE, fire_en_a, fire_en_b, fire_bn_a, fire_bn_b),
    "policy_rate": (RATE, rate_en_a, rate_en_b, rate_bn_a, rate_bn_b),
    "road_accident": (ACCIDENT, accident_en_a, accident_en_b, accident_bn_a, accident_bn_b),
}

# Hand-written pairs outside the templates (tests/semantic_data.py has the same stories).
EXTRA = [
    ("same_event", 1, "en", "Dhaka metro rail extends service hours to midnight\nThe Dhaka Mass Transit Company "
     "Limited said on Thursday that trains on the Uttara-Motijheel line will run until 12am from Sunday, two hours "
     "later than now, to ease evening rush-hour crowding.",
     "en", "Metro trains in Dhaka to run till midnight from Sunday\nDMTCL officials announced that metro rail "
     "services between Uttara and Motijheel will continue until midnight starting this Sunday, extending operating "
     "hours by two hours to cut evening congestion."),
    ("same_topic", 0, "en", "Abahani edge Mohammedan 2-1 in Dhaka derby\nAbahani Limited beat Mohammedan Sporting "
     "Club 2-1 in the Bangladesh Premier League at the Bashundhara Kings Arena on Friday.",
     "en", "Mohammedan beat Abahani 1-0 in Dhaka derby rematch\nMohammedan Sporting Club beat Abahani Limited 1-0 "
     "in the Bangladesh Premier League at the Bashundhara Kings Arena on Friday, avenging last week's defeat."),
    ("same_event", 1, "en", "Flood situation worsens in Sylhet\nRivers in Sylhet and Sunamganj rose above danger "
     "level on Tuesday, leaving thousands of families stranded as the Surma kept swelling after heavy rain upstream.",
     "bn", "সিলেটে বন্যা পরিস্থিতির অবনতি\nমঙ্গলবার সিলেট ও সুনামগঞ্জে নদীর পানি বিপৎসীমার ওপর দিয়ে বইছে। উজানে ভারী "
     "বৃষ্টিতে সুরমার পানি বাড়তে থাকায় হাজারো পরিবার পানিবন্দী।"),
    ("same_topic", 0, "en", "Flood situation worsens in Sylhet\nRivers in Sylhet and Sunamganj rose above danger "
     "level on Tuesday, leaving thousands of families stranded as the Surma kept swelling after heavy rain upstream.",
     "en", "Floodwater recedes in Kurigram\nThe Brahmaputra and Dharla fell below danger level in Kurigram on "
     "Saturday, and families who had sheltered on embankments began returning home to damaged houses."),
]


def text(title_body: tuple[str, str]) -> str:
    return f"{title_body[0]}\n{title_body[1]}"


def pairs() -> list[dict]:
    out: list[dict] = []

    def add(kind, label, lang_a, a, lang_b, b, domain):
        out.append({"pair_id": len(out) + 1, "kind": kind, "label": label, "domain": domain,
                    "lang_a": lang_a, "text_a": a, "lang_b": lang_b, "text_b": b})

    for domain, (events, en_a, en_b, bn_a, bn_b) in DOMAINS.items():
        for e in events:
            add("same_event", 1, "en", text(en_a(e)), "en", text(en_b(e)), domain)
            add("same_event", 1, "bn", text(bn_a(e)), "bn", text(bn_b(e)), domain)
            add("same_event", 1, "en", text(en_a(e)), "bn", text(bn_b(e)), domain)
            add("same_event", 1, "en", text(en_b(e)), "bn", text(bn_a(e)), domain)
        for e, f in itertools.combinations(events, 2):
            for lang, w in (("en", en_a), ("en", en_b), ("bn", bn_a), ("bn", bn_b)):
                add("same_template", 0, lang, text(w(e)), lang, text(w(f)), domain)
            add("same_topic", 0, "en", text(en_a(e)), "en", text(en_b(f)), domain)
            add("same_topic", 0, "bn", text(bn_a(e)), "bn", text(bn_b(f)), domain)
            add("same_topic", 0, "en", text(en_a(e)), "bn", text(bn_b(f)), domain)
    for kind, label, la, a, lb, b in EXTRA:
        add(kind, label, la, a, lb, b, "extra")
    return out


def main() -> None:
    rows = pairs()
    with open(HERE / "semantic_pairs.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} pairs to {HERE / 'semantic_pairs.jsonl'}")


if __name__ == "__main__":
    main()
