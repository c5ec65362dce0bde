import { describe, expect, it } from "vitest";
import { detectLanguage, proseOf } from "../../../src/signals/language.ts";

/** Per language: short prompts (≈60 characters) and a paragraph. */
const SAMPLES: Readonly<Record<string, readonly string[]>> = {
  en: [
    "Can you summarize this article in three bullet points for me?",
    "Write a function that checks whether a string is a palindrome.",
    "The city council met on Tuesday evening to discuss the new budget for public transport. Several residents spoke about the delays on the northern bus lines, which have become worse since the road works began in the spring.",
  ],
  de: [
    "Kannst du mir diesen Artikel in drei Stichpunkten zusammenfassen?",
    "Wie bleiben frische Kräuter im Kühlschrank länger haltbar?",
    "Der Stadtrat hat sich am Dienstagabend getroffen, um über den neuen Haushalt für den öffentlichen Nahverkehr zu beraten. Mehrere Anwohner berichteten von Verspätungen auf den nördlichen Buslinien.",
  ],
  fr: [
    "Peux-tu me résumer cet article en trois points principaux ?",
    "Écris une fonction qui vérifie si une chaîne est un palindrome.",
    "Le conseil municipal s'est réuni mardi soir pour discuter du nouveau budget des transports publics. Plusieurs habitants ont parlé des retards sur les lignes de bus du nord.",
  ],
  es: [
    "¿Puedes resumirme este artículo en tres puntos principales?",
    "Por favor, traduce el siguiente correo a un tono más formal.",
    "El ayuntamiento se reunió el martes por la noche para hablar del nuevo presupuesto del transporte público. Varios vecinos hablaron de los retrasos en las líneas de autobús del norte.",
  ],
  it: [
    "Puoi riassumere questo articolo in tre punti principali?",
    "Qual è il modo migliore per conservare le erbe fresche?",
    "Il consiglio comunale si è riunito martedì sera per discutere il nuovo bilancio del trasporto pubblico. Diversi residenti hanno parlato dei ritardi sulle linee di autobus del nord.",
  ],
  pt: [
    "Você pode resumir este artigo em três tópicos para mim?",
    "Escreva uma função que verifique se uma palavra é um palíndromo.",
    "A câmara municipal reuniu-se na terça-feira à noite para discutir o novo orçamento dos transportes públicos. Vários moradores falaram sobre os atrasos nas linhas de ônibus do norte.",
  ],
  nl: [
    "Kun je dit artikel voor mij samenvatten in drie punten?",
    "Wat is de beste manier om verse kruiden langer goed te houden?",
    "De gemeenteraad kwam dinsdagavond bijeen om de nieuwe begroting voor het openbaar vervoer te bespreken. Verschillende bewoners vertelden over de vertragingen op de noordelijke buslijnen.",
  ],
  ru: [
    "Можешь кратко пересказать эту статью в трёх пунктах?",
    "Напиши функцию, которая проверяет, является ли строка палиндромом.",
    "Городской совет собрался во вторник вечером, чтобы обсудить новый бюджет общественного транспорта. Несколько жителей рассказали о задержках на северных автобусных маршрутах.",
  ],
  uk: [
    "Чи можеш ти коротко переказати цю статтю в трьох пунктах?",
    "Будь ласка, переклади цей лист у більш офіційному тоні.",
    "Міська рада зібралася у вівторок увечері, щоб обговорити новий бюджет громадського транспорту. Кілька мешканців розповіли про затримки на північних автобусних маршрутах.",
  ],
  zh: [
    "你能用三个要点帮我总结一下这篇文章吗？",
    "写一个函数来检查一个字符串是不是回文。",
    "市议会星期二晚上开会，讨论公共交通的新预算。几位居民谈到了北部公交线路的延误问题，自从春天开始修路以来，情况变得更加严重。",
  ],
  ja: [
    "この記事を三つのポイントで要約してもらえますか？",
    "次のメールをもっと丁寧な表現に翻訳してください。",
    "市議会は火曜日の夜に会合を開き、公共交通の新しい予算について話し合いました。何人かの住民は、春に道路工事が始まってから北部のバス路線の遅れがさらにひどくなったと訴えました。",
  ],
  ko: [
    "이 기사를 세 가지 요점으로 요약해 줄 수 있나요?",
    "문자열이 회문인지 확인하는 함수를 작성해 주세요.",
    "시의회는 화요일 저녁에 모여 대중교통의 새 예산에 대해 논의했습니다. 여러 주민들은 봄에 도로 공사가 시작된 이후 북부 버스 노선의 지연이 더 심해졌다고 말했습니다.",
  ],
  ar: [
    "هل يمكنك تلخيص هذه المقالة في ثلاث نقاط رئيسية؟",
    "من فضلك ترجم الرسالة التالية بأسلوب أكثر رسمية.",
    "اجتمع مجلس المدينة مساء يوم الثلاثاء لمناقشة الميزانية الجديدة للنقل العام. تحدث عدد من السكان عن التأخيرات في خطوط الحافلات الشمالية.",
  ],
  pl: [
    "Czy możesz streścić ten artykuł w trzech punktach?",
    "Napisz funkcję, która sprawdza, czy słowo jest palindromem.",
    "Rada miasta zebrała się we wtorek wieczorem, aby omówić nowy budżet transportu publicznego. Kilku mieszkańców mówiło o opóźnieniach na północnych liniach autobusowych.",
  ],
  tr: [
    "Bu makaleyi benim için üç madde halinde özetler misin?",
    "Lütfen aşağıdaki e-postayı daha resmi bir dille çevir.",
    "Belediye meclisi salı akşamı toplu taşımanın yeni bütçesini görüşmek için toplandı. Birkaç mahalle sakini kuzey otobüs hatlarındaki gecikmelerden söz etti.",
  ],
  sv: [
    "Kan du sammanfatta den här artikeln i tre punkter åt mig?",
    "Översätt gärna följande mejl till en mer formell ton.",
    "Kommunfullmäktige samlades på tisdagskvällen för att diskutera den nya budgeten för kollektivtrafiken. Flera invånare berättade om förseningarna på de norra busslinjerna.",
  ],
};

describe("detectLanguage", () => {
  for (const [language, texts] of Object.entries(SAMPLES)) {
    it(`tells ${language} in short prompts and a paragraph`, () => {
      for (const text of texts) {
        const got = detectLanguage(text);
        expect(got?.language, text).toBe(language);
        expect(got!.confidence).toBeGreaterThan(0);
        expect(got!.confidence).toBeLessThanOrEqual(1);
      }
    });
  }

  it("reads the prose of a prompt that mixes it with code", () => {
    const cases: [string, string][] = [
      ["es", "¿Por qué falla `npm install` con EACCES en mi portátil Linux después de actualizar Node?"],
      ["it", "Perché `npm install` fallisce con EACCES sul mio portatile Linux dopo l'aggiornamento di Node?"],
      ["pt", "Refatore isto: const x = items.map(i => i.id).filter(Boolean); e explique por quê."],
      ["nl", "Waarom mislukt `npm install` met EACCES op mijn Linux-laptop na het bijwerken van Node?"],
      ["de", "Warum wirft diese Funktion einen Fehler?\n```python\ndef parse(path):\n    with open(path) as f:\n        return json.load(f)\n```\nIch verstehe die Meldung nicht, kannst du sie erklären?"],
      ["fr", "Voici le journal : https://example.com/logs/2026/12/07/run-42.txt — pourquoi le déploiement échoue-t-il à chaque fois ?"],
    ];
    for (const [language, text] of cases) expect(detectLanguage(text)?.language, text).toBe(language);
  });

  it("is unsure of what is too short, has no letters, or is only code", () => {
    for (const text of ["", "   ", "hi", "Hello", "ok", "你好", "1234 5678 9012", "🙂🙂🙂", "if (x > 0) { y = f(x); }", "```js\nconsole.log(process.env.HOME)\n```", "https://example.com/a/b?c=d"]) {
      expect(detectLanguage(text), JSON.stringify(text)).toBeUndefined();
    }
  });

  it("is unsure of a near tie between close languages rather than guessing", () => {
    // Ukrainian that reads equally as Serbian Cyrillic to the detector.
    expect(detectLanguage("Котра зараз година?")).toBeUndefined();
  });

  it("reads a bounded window of a long prompt, so a few hundred KB costs what a short one does", () => {
    const paragraph = SAMPLES.de![2]!;
    const long = (paragraph + " ").repeat(Math.ceil(400_000 / paragraph.length));
    const start = performance.now();
    for (let i = 0; i < 20; i++) expect(detectLanguage(long)?.language).toBe("de");
    expect(performance.now() - start).toBeLessThan(1_000);
    // Code at the start is skipped and the prose after it is read.
    expect(detectLanguage("```\n" + "x = 1\n".repeat(500) + "```\n" + SAMPLES.fr![2])?.language).toBe("fr");
  });
});

describe("proseOf", () => {
  it("drops code blocks, inline code, URLs, e-mail addresses, identifiers and numbers", () => {
    expect(proseOf("Bitte `npm ci` ausführen:\n```sh\nnpm ci\n```\nsiehe https://x.dev/a und a.b@c.de, Fehler E42 in foo_bar() seit 2026")).toBe("Bitte ausführen: siehe und Fehler in seit");
  });

  it("drops an unclosed code fence to the end", () => {
    expect(proseOf("Erkläre das:\n```\nfor (;;) {}\nmehr Code")).toBe("Erkläre das:");
  });
});
