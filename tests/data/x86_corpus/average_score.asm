; Average exam score of the class, rounded down
section .rodata
    students dd ann, bob, cy, dee
    ann db "Ann", 0
    bob db "Bob", 0
    cy  db "Cy", 0
    dee db "Dee", 0

section .bss
    total   resd 1
    average resd 1

section .text
global _start
_start:
    mov ecx, 4
.next:
    push ecx                              ; keep the counter across the call
    push dword [students + ecx*4 - 4]
    call get_score
    add [total], eax
    pop ecx
    loop .next

    mov eax, [total]
    xor edx, edx
    mov ecx, 4
    div ecx                               ; eax = total / 4, edx = remainder
    mov [average], eax
    push eax
    call report_average
    hlt
