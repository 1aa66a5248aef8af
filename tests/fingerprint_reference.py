"""Reference vector: fingerprints computed by the per-row code before the batch kernel (commit c13ce6a).

Stored fingerprints stay valid only while these values hold. The texts are English ASCII and Bangla
prose that the text-normalisation and tokeniser fixes of issue 12 do not touch.
"""

# flake8: noqa: E501

EN = [
    "Dhaka, June 3 -- The government on Monday raised the price of diesel by 5 taka per litre, citing higher import costs. Transport owners said fares would rise from next week, while the commerce minister urged traders not to hoard fuel. The central bank said inflation stood at 9.7 percent in May.",
    "Heavy rain flooded large parts of Chattogram city on Tuesday, leaving thousands of commuters stranded. The Met Office forecast more showers over the next three days and advised fishing boats in the Bay of Bengal to stay close to the coast. Schools in low-lying areas were closed.",
    "Bangladesh beat Sri Lanka by six wickets in the second one-day international at Mirpur on Friday. Chasing 247, the hosts reached the target with 14 balls to spare thanks to an unbeaten 88 from the captain. The three-match series is now level at 1-1, with the decider on Sunday.",
    "The High Court asked the election commission to explain within four weeks why the voter list of 12 upazilas should not be declared illegal. Lawyers for the petitioners said at least 40,000 names had been added after the deadline without any public notice.",
    "Garment exports grew 11 percent year on year in the first quarter, according to the Export Promotion Bureau. Factory owners warned, however, that gas shortages and rising wages could slow orders from European buyers in the coming months.",
    "Police said the bridge would remain closed to heavy vehicles until engineers finish inspecting its pillars. The road transport authority has set up diversions through two nearby highways.",
    "Live updates",
    "budget budget budget budget budget budget budget budget budget budget budget budget",
    "one two three four five six seven eight nine ten",
    "A B C",
    "Prices 2024 2025 2026: rice 60, lentils 110, onions 95, potatoes 45, eggs 150 per dozen, oil 175 per litre"
]

BN = [
    "ঢাকায় টানা বৃষ্টিতে জলাবদ্ধতা তৈরি হয়েছে এবং বহু সড়কে যান চলাচল বন্ধ রয়েছে। সিটি করপোরেশন জানিয়েছে দ্রুত পানি নিষ্কাশনের কাজ চলছে। আবহাওয়া অফিস আগামী তিন দিন আরও বৃষ্টির পূর্বাভাস দিয়েছে।",
    "বাংলাদেশ ব্যাংক নীতি সুদহার বাড়িয়ে সাড়ে আট শতাংশ করেছে। মূল্যস্ফীতি নিয়ন্ত্রণে রাখতে এই সিদ্ধান্ত নেওয়া হয়েছে বলে জানিয়েছেন গভর্নর। ব্যবসায়ীরা বলছেন, ঋণের খরচ বাড়লে বিনিয়োগ কমতে পারে।",
    "মিরপুরে দ্বিতীয় ওয়ানডেতে শ্রীলঙ্কাকে ছয় উইকেটে হারিয়েছে বাংলাদেশ। ২৪৭ রানের লক্ষ্য তাড়া করতে নেমে অধিনায়কের অপরাজিত ৮৮ রানের ইনিংসে ১৪ বল হাতে রেখে জয় নিশ্চিত হয়।",
    "চট্টগ্রাম বন্দরে কনটেইনার জট কমাতে নতুন টার্মিনাল চালুর উদ্যোগ নিয়েছে সরকার। বন্দর কর্তৃপক্ষের চেয়ারম্যান বলেন, আগামী বছরের মধ্যে টার্মিনালটি পুরোপুরি চালু হবে।",
    "র্যাব অভিযান চালিয়ে ১২ জনকে আটক করেছে।",
    "বাংলাদেশের নয়া নীতি ঘোষণা করা হলো",
    "খবর",
    "পদ্মা সেতু দিয়ে প্রতিদিন গড়ে ২০ হাজার যানবাহন পারাপার হচ্ছে, টোল আদায় ছাড়িয়েছে দুই কোটি টাকা।"
]

TITLES_EN = ["Diesel price up by Tk 5", "Rain floods Chattogram", "Tigers level series", "HC questions voter list", "Exports grow 11pc", "Bridge closed", "Live updates", "Budget", "Counting", "Letters", "Prices"]

TITLES_BN = ["ঢাকায় জলাবদ্ধতা", "নীতি সুদহার বাড়ল", "বাংলাদেশের জয়", "বন্দরে নতুন টার্মিনাল", "র্যাবের অভিযান", "নয়া নীতি", "খবর", "পদ্মা সেতু"]

# (corpus, index, feature kind, n, simhash, distinct features, feature occurrences)
KERNEL = [
    ('EN', 0, 'word', 3, 700279379225339698, 50, 50),
    ('EN', 0, 'char', 4, -6687487072020243558, 262, 282),
    ('EN', 1, 'word', 3, -6826493774705644430, 46, 46),
    ('EN', 1, 'char', 4, -283641210770786684, 251, 272),
    ('EN', 2, 'word', 3, -8534249410479081866, 50, 50),
    ('EN', 2, 'char', 4, -8929424851646392358, 244, 269),
    ('EN', 3, 'word', 3, -7471840531883525496, 42, 42),
    ('EN', 3, 'char', 4, -4751015197391033636, 234, 250),
    ('EN', 4, 'word', 3, 1446534816026989655, 36, 36),
    ('EN', 4, 'char', 4, 3961713673714720688, 207, 229),
    ('EN', 5, 'word', 3, -5363599843396434845, 26, 26),
    ('EN', 5, 'char', 4, -5577059674587077980, 179, 182),
    ('EN', 6, 'word', 3, 73195013992121480, 2, 2),
    ('EN', 6, 'char', 4, -6718477809779570110, 9, 9),
    ('EN', 7, 'word', 3, 2192669592183769646, 1, 10),
    ('EN', 7, 'char', 4, 6509686773136175953, 7, 80),
    ('EN', 8, 'word', 3, -6235484772694215967, 8, 8),
    ('EN', 8, 'char', 4, -5062721889293901631, 44, 45),
    ('EN', 9, 'word', 3, -1657131110412112182, 1, 1),
    ('EN', 9, 'char', 4, -2305543186136628444, 2, 2),
    ('EN', 10, 'word', 3, -5042617597664943349, 18, 18),
    ('EN', 10, 'char', 4, -3355919366030151956, 92, 97),
    ('BN', 0, 'char', 4, 6426680495501303385, 175, 188),
    ('BN', 1, 'char', 4, 6801933339521428763, 175, 186),
    ('BN', 2, 'char', 4, 2206716337550092212, 161, 165),
    ('BN', 3, 'char', 4, 1595202172384655579, 144, 156),
    ('BN', 4, 'char', 4, 2125426400089608716, 35, 35),
    ('BN', 5, 'char', 4, -1803161818039058872, 31, 31),
    ('BN', 6, 'char', 4, -8962425591588563463, 3, 3),
    ('BN', 7, 'char', 4, 2210589391007874161, 92, 93),
]

# (title, lang, content_hash, text_chars, simhash, n_features) from ContentKeys + SimhashKeys with the default config
ROWS = [
    ('Diesel price up by Tk 5', 'en', '34be7fd4421b7f523da4d36036b116ceec87333d4b8dcc591bb15b4786c8ed18', 318, 116511276939208482, 56),
    ('Rain floods Chattogram', 'en', '9cc3f072281c9da77ea4233499a47677fe68500f127a4b5d66d6852588d58e15', 302, -6826493774437208974, 49),
    ('Tigers level series', 'en', '560cda05316f1cc5c588326e3ac39526c1ca224cee9f912ae6fe1fb8589c4d26', 297, -8533123506344380810, 53),
    ('HC questions voter list', 'en', '6a80843705afa6b52e9748222f41eb6dff3cf823c5351e340b172554bbb1d5e9', 279, -7463000527250163064, 46),
    ('Exports grow 11pc', 'en', '2bcd159bba1f66fbf34ad6f160c62fc6a4ffd89831a969be0d37a4733734079a', 255, 1446534919110399575, 39),
    ('Bridge closed', 'en', '23fb4232ed9ce9af41c66ccbaa6fe19567592130d35949aa0175ae1d6d2611e1', 201, 1554492134097405027, 28),
    ('Live updates', 'en', 'e3a26b1d8d01ac6bc0d156462b906a91a243acd5ace38dd15f26be4c11f6c0a9', 25, None, 2),
    ('Budget', 'en', 'f5224ec3746fad34e8ac0e0909d4308fd75e9cdf14114a54db2e17180b9ddefa', 90, None, 1),
    ('Counting', 'en', '78084741310a7c858ecd72870642747c19f99b148dd5f3dcefc6b2ecfe4c5380', 57, -6235484703974214943, 9),
    ('Letters', 'en', 'fa6f80355c4c77b50b0c45a2c9bc65a5201403ce8a41a660c795d98c097210da', 13, None, 2),
    ('Prices', 'en', 'a7f88e8f7c4269a517e62cfb27020f96c5afd4ccb7c37879845f4f0a3305b873', 113, -5042476860175490293, 19),
    ('ঢাকায় জলাবদ্ধতা', 'bn', 'e5203fb6c640ba153bccbe4546b3db1ac985c5a42b06b36e2538a68a84855b5a', 211, 6462707917065379417, 180),
    ('নীতি সুদহার বাড়ল', 'bn', '1497965a3aa64352d564793515ca531573dcc2ed034051dddc59ee21a9aaf1cf', 211, 5649011832766965011, 179),
    ('বাংলাদেশের জয়', 'bn', '9d3a59e4b57278e18065de344ee01ae8a3f84748ebc7362579ed1f0e32c18192', 185, 2213449901377547958, 169),
    ('বন্দরে নতুন টার্মিনাল', 'bn', 'e85ee4e2321775c88d39b2eeb17cae6461094af60682c319a85945f5b34ec633', 184, 1883432617255835898, 147),
    ('র্যাবের অভিযান', 'bn', '83d190650fdeab62ca4b2839d038f3409c0d6599df1485460b68097418088c95', 54, 2264476148884053517, 43),
    ('নয়া নীতি', 'bn', 'd6936a8c1b5c0a6c3e1cd96d7685ca474107ea4212e6e1a5b8bfda8ea90a94b6', 44, -1807823747340849336, 34),
    ('খবর', 'bn', '794441692d1c5ed86e58d1c95dbedec0f14b56d6ac418d437064bfd6845cc584', 7, None, 4),
    ('পদ্মা সেতু', 'bn', '64785b9e7f298089f233c3b800264c9bd8e69676f48fca1d1ac1d4baa18b8261', 109, 2210448654191656049, 95),
]
